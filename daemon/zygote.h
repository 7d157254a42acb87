#pragma once
// The zygote: a single-threaded process forked by the supervisor before the supervisor starts any
// thread or could touch CUDA. It forks every child, first start and restart alike, so a restarted child
// inherits exactly what the first one did, and it reaps them and reports every exit.
//
// Supervisor -> zygote: one SpawnRequest per message with the child's mailbox memfd and control socket
// attached. Zygote -> supervisor: ZygoteEvent SPAWNED (with the pid), SPAWN_FAILED (errno) and EXITED
// (pid and wait status). When the supervisor closes its end or dies, the zygote SIGKILLs its children,
// reaps them and exits; PR_SET_PDEATHSIG makes the kernel do the same if the zygote itself is killed.
//
// Thread safety: request_spawn from any thread (serialized by the socket); read_event from one thread.

#include "ipc/unique_fd.h"

#include <cstdint>
#include <functional>
#include <string>
#include <sys/types.h>
#include <utility>

namespace canopy::daemon {

struct SpawnRequest {
    std::uint32_t child_index;
    std::uint32_t generation;
};

enum class ZygoteEventType : std::uint32_t { SPAWNED = 1, SPAWN_FAILED = 2, EXITED = 3 };

struct ZygoteEvent {
    ZygoteEventType type;
    std::uint32_t child_index;
    std::uint32_t generation;
    std::int32_t pid;
    std::int32_t status; // wait status for EXITED, errno for SPAWN_FAILED
    std::int32_t reserved;
};

// What a forked child runs; its return value is the child's exit code.
using ChildMain = std::function<int(const SpawnRequest&, ipc::UniqueFd mailbox, ipc::UniqueFd control)>;

// "exited with code 3", "killed by signal 9 (Killed)".
std::string describe_wait_status(int status);

class Zygote {
public:
    // Forks the zygote. REQUIRES: this process has exactly one thread.
    static Zygote start(ChildMain child_main);

    Zygote(Zygote&& other) noexcept : pid_(std::exchange(other.pid_, -1)), socket_(std::move(other.socket_)) {}
    Zygote& operator=(Zygote&&) = delete;
    Zygote(const Zygote&) = delete;
    ~Zygote();

    pid_t pid() const noexcept { return pid_; }

    // Throws ipc::SysError when the zygote is gone.
    void request_spawn(const SpawnRequest& request, int mailbox_fd, int control_fd);

    // Blocks for the next event. Returns false when the zygote closed its end (it exited).
    bool read_event(ZygoteEvent& event);

    // Closes the request socket (the zygote then kills and reaps every child and exits) and reaps the
    // zygote. Idempotent.
    void stop();

private:
    Zygote(pid_t pid, ipc::UniqueFd socket) : pid_(pid), socket_(std::move(socket)) {}

    pid_t pid_ = -1;
    ipc::UniqueFd socket_;
};

} // namespace canopy::daemon
