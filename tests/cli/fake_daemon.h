#pragma once
// FakeDaemon: a stand-in for canopyd's control socket in the CLI tests. It listens on a Unix socket in a
// private temporary directory, serves one connection at a time, reads one frame per request (and the attachment a
// buffer.write announces), records the request as sent and answers with what the test's handler returns: a reply
// object (the server adds the request's "id", as canopyd does) with the bytes of its attachment, or raw bytes (to
// feed the client malformed frames).
//
// run() drives the CLI in process against it.
//
// Ownership: owns the directory, the socket and the server thread; the destructor stops the thread and
// removes both. Thread safety: the handler runs on the server thread, one request at a time; requests()
// may be called from any thread.

#include "cli/environment.h"

#include <functional>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace canopy::cli::testing {

struct FakeReply {
    std::optional<nlohmann::json> body; // sent framed, with "id" added; or
    std::string raw;                    // sent as it is when body is empty
    bool close_after = false;           // close the connection after sending
    std::string attachment{};           // sent right after the body's frame
};

// {"ok": true, ...payload}.
FakeReply ok(nlohmann::json payload = nlohmann::json::object());
// {"ok": true, "attachment": N, ...payload} followed by the N bytes.
FakeReply ok_with(std::string bytes, nlohmann::json payload = nlohmann::json::object());
// A frame: the 4-byte little-endian length `n`, then (frame) `body`.
std::string frame_header(std::uint32_t n);
std::string frame(const std::string& body);
// {"ok": false, "error": {"code", "message"}}.
FakeReply error(const std::string& code, const std::string& message);
// Bytes as they are (a bad frame, a partial one).
FakeReply raw(std::string bytes, bool close_after = false);

class FakeDaemon {
public:
    using Handler = std::function<FakeReply(const nlohmann::json& request)>;
    // Also gets the attachment of a buffer.write ("" for any other request).
    using AttachmentHandler = std::function<FakeReply(const nlohmann::json& request, const std::string& attachment)>;

    explicit FakeDaemon(Handler handler);
    explicit FakeDaemon(AttachmentHandler handler);
    ~FakeDaemon();
    FakeDaemon(const FakeDaemon&) = delete;
    FakeDaemon& operator=(const FakeDaemon&) = delete;

    const std::string& socket_path() const noexcept { return socket_path_; }
    const std::string& dir() const noexcept { return dir_; }

    // Every request received so far, in order, exactly as sent.
    std::vector<nlohmann::json> requests() const;
    // The attachment of each buffer.write received so far ("attachment": N), in order.
    std::vector<std::string> attachments() const;

private:
    void serve();
    void serve_connection(int fd);
    bool wait_readable(int fd) const;

    AttachmentHandler handler_;
    std::string dir_;
    std::string socket_path_;
    int listen_fd_ = -1;
    int stop_pipe_[2] = {-1, -1};
    mutable std::mutex mutex_;
    std::vector<nlohmann::json> requests_;
    std::vector<std::string> attachments_;
    std::thread thread_;
};

struct CliRun {
    int rc = -1;
    std::string out;
    std::string err;
};

// A posix_shm buffer of 64 bytes as canopyd describes one.
inline const nlohmann::json SHM_BUFFER = {
    {"id", "0011..ff.3.1"}, {"backend", "posix_shm"},           {"nbytes", 64}, {"access", "rw"},
    {"device", 0},          {"world", nlohmann::json::array()}, {"name", ""},   {"creator", "/"}};

// A test Environment: no $CANOPY_SOCKET, stderr not a terminal.
Environment test_env();

// run_cli(args + "--socket" + socket) with `env`; the socket is appended when it is not empty.
CliRun run(std::vector<std::string> args, const std::string& socket, const Environment& env = test_env());

// A file in `dir` holding `content`; returns its path.
std::string write_file(const std::string& dir, const std::string& name, const std::string& content);
std::string read_whole_file(const std::string& path);

// Runs `args` against a fresh FakeDaemon that answers with `handler`; requires exit status 0 and exactly one
// request, and returns that request.
nlohmann::json only_request(FakeDaemon::Handler handler, const std::vector<std::string>& args);

} // namespace canopy::cli::testing
