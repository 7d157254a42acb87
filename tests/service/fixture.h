#pragma once
// End-to-end fixtures: a real canopyd process on a private socket and state directory, the real canopy
// CLI run as a subprocess, and a raw frame client for what the CLI never sends. Everything is cleaned up
// in destructors, also when a test fails.
//
// CANOPYD_PATH and CANOPY_PATH are the built binaries (compile definitions from CMake).

#include "ipc/unique_fd.h"

#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace canopy::e2e {

// A fresh directory under /tmp, removed on destruction.
struct TempDir {
    std::filesystem::path path;
    TempDir();
    ~TempDir();
};

// The JSON text of a config for a private daemon: an L3 "e2e" with `sim_chips` sim chips and `subs`
// subs, fault kernels on, short back-off. `extra` is merged over the top level (e.g. supervision).
nlohmann::json e2e_config(int sim_chips, int subs, const nlohmann::json& extra = nlohmann::json::object());

// The canopy CLI the tests run: CANOPY_E2E_CANOPY when set, else the one built with them (CANOPYD_PATH's
// counterpart for canopyd is CANOPY_E2E_CANOPYD).
std::string cli_binary();

struct Output {
    int rc = -1;
    std::string out;
    std::string err;
    nlohmann::json json() const; // out parsed as JSON (throws when it is not)
};

// Runs a program with `args`, extra environment, optionally as another uid/gid; waits up to `limit`.
Output run_program(const std::string& program, const std::vector<std::string>& args,
                   const std::map<std::string, std::string>& env = {}, std::optional<uid_t> as_uid = std::nullopt,
                   std::chrono::seconds limit = std::chrono::seconds(60));

class Daemon {
public:
    // Writes the config into a temp dir and starts canopyd with it; returns once the socket answers
    // `status` (throws with the daemon's log when it does not within 20 s). `in_child` runs in the forked
    // child before exec (setrlimit, unshare, mount: system calls only); a false return makes the child exit
    // 126 and the constructor throw.
    explicit Daemon(const nlohmann::json& config, const std::map<std::string, std::string>& env = {},
                    const std::function<bool()>& in_child = {});
    ~Daemon(); // SIGTERM, then waits (SIGKILL after 20 s); a daemon killed by a signal leaves no shm object

    const std::string& socket() const noexcept { return socket_; }
    const std::filesystem::path& dir() const noexcept { return dir_.path; }
    pid_t pid() const noexcept { return pid_; }
    std::string log() const;

    // canopy ARGS against this daemon.
    Output cli(const std::vector<std::string>& args, std::optional<uid_t> as_uid = std::nullopt) const;
    // canopy ARGS --json, with the output parsed.
    nlohmann::json cli_json(const std::vector<std::string>& args) const;
    // A new shm buffer of `bytes` (access "rw" unless given); returns its ID.
    std::string create_buffer(std::uint64_t bytes, const std::string& access = "rw") const;

    // Sends SIGTERM and waits for the exit status (returns it).
    int stop();
    // Waits up to `limit` for the daemon to exit on its own; its exit status, or nullopt while it runs.
    std::optional<int> wait_exit(std::chrono::milliseconds limit);

private:
    // The daemon has exited with `status`: forgets its pid, unlinks what a killed one left, returns its code.
    int reaped(int status);

    TempDir dir_;
    std::string socket_;
    pid_t pid_ = -1;
};

// A raw connection speaking frames, for malformed input.
class RawClient {
public:
    explicit RawClient(const std::string& socket);
    ~RawClient();
    void send_bytes(const std::string& bytes);
    void send_frame(const std::string& body);
    // Ends this side of the stream (shutdown SHUT_WR): the daemon reads end-of-file; replies can still be read.
    void close_write();
    // The next reply frame's JSON; nullopt when the daemon closed the connection.
    std::optional<nlohmann::json> read_reply(std::chrono::milliseconds limit = std::chrono::milliseconds(5000));
    nlohmann::json request(const nlohmann::json& body); // send_frame + read_reply (throws on close)
    // The next `n` raw bytes (the attachment after a reply); nullopt when the daemon closed the connection first.
    std::optional<std::string> read_bytes(std::size_t n,
                                          std::chrono::milliseconds limit = std::chrono::milliseconds(5000));
    // True when the daemon closed the connection (EOF or a reset) within `limit`.
    bool closed_by_peer(std::chrono::milliseconds limit = std::chrono::milliseconds(5000));
    int fd() const noexcept { return fd_; }
    // The fds that replies read so far carried (buffer.fd), taken out of the client.
    std::vector<canopy::ipc::UniqueFd> take_fds() { return std::exchange(fds_, {}); }

private:
    // Reads exactly n bytes, each within `limit` of the one before; false on a close or a timeout.
    bool read_exact(char* p, std::size_t n, std::chrono::milliseconds limit);

    int fd_ = -1;
    std::vector<canopy::ipc::UniqueFd> fds_;
};

// Polls `tasks` (test set-up, not a dispatch path) until the task named `name` has started; returns its state
// then ("running", or "completed"/"failed" when it finished between two polls), or "" when it has not started
// within `limit`.
std::string wait_task_started(const Daemon& d, const std::string& name,
                              std::chrono::milliseconds limit = std::chrono::milliseconds(10000));

} // namespace canopy::e2e
