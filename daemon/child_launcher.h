#pragma once
// ChildLauncher: how a supervisor starts its children and learns of their ends. The daemon's launcher is the
// Zygote (daemon/zygote.h), which forks every child from a single-threaded, CUDA-free process; tests give a
// supervisor a launcher that forks nothing, so the restart policy, back-off and timeouts are exercised without
// processes.
//
// Events: after request_spawn, the launcher reports SPAWNED (with the pid) or SPAWN_FAILED for it, and later
// EXITED with the wait status. read_event returning false means the launcher itself died (the zygote): the
// supervisor then calls replace(), and every child the dead launcher started is gone with it.
//
// Thread safety: request_spawn, kill, pid, standby_pid and stop from any thread; read_event and replace from one
// thread (the supervisor's event thread).

#include "ipc/unique_fd.h"

#include <cerrno>
#include <cstdint>
#include <functional>
#include <string>
#include <sys/types.h>

namespace canopy::daemon {

struct SpawnRequest {
    std::uint32_t child_index;
    std::uint32_t generation;
};

enum class ZygoteEventType : std::uint32_t {
    SPAWNED = 1,
    SPAWN_FAILED = 2,
    EXITED = 3,
    STANDBY = 4,
    STANDBY_EXITED = 5
};

// ZygoteEvent::status of a STANDBY whose socket this process could not receive (out of fds): the standby
// exits, and the zygote forks the next one when it next spawns a child.
inline constexpr std::int32_t STANDBY_LOST = EMFILE;

struct ZygoteEvent {
    ZygoteEventType type;
    std::uint32_t child_index;
    std::uint32_t generation;
    std::int32_t pid;
    std::int32_t
        status; // wait status for EXITED and STANDBY_EXITED, errno for SPAWN_FAILED, STANDBY_LOST or 0 for STANDBY
    std::int32_t reserved;
};

// What a forked child runs; its return value is the child's exit code.
using ChildMain = std::function<int(const SpawnRequest&, ipc::UniqueFd mailbox, ipc::UniqueFd control)>;

// "exited with code 3", "killed by signal 9 (SIGKILL)".
std::string describe_wait_status(int status);

// The end of one zygote: its pid, how it ended when that is known (a promoted standby is not the
// supervisor's child, so its wait status goes to whoever adopted it), and the standby that took its place.
struct ZygoteDeath {
    pid_t pid = -1;
    std::string how;
    pid_t successor = -1;    // -1 when no standby could take over
    std::uint32_t epoch = 0; // the epoch request_spawn returns from now on
};

class ChildLauncher {
public:
    virtual ~ChildLauncher() = default;
    // The launcher's own pid, and its standby's (-1 while there is none), for reports.
    virtual pid_t pid() const = 0;
    virtual pid_t standby_pid() const = 0;
    // Starts child `request` with the child's ends of its mailbox memfd and control socket (borrowed: the
    // launcher passes on copies). Returns the epoch of the launcher that takes it (the number replaced before
    // it). Throws ipc::SysError when the launcher is gone.
    virtual std::uint32_t request_spawn(const SpawnRequest& request, int mailbox_fd, int control_fd) = 0;
    // Blocks for the next event; false when the launcher died or stop() ran.
    virtual bool read_event(ZygoteEvent& event) = 0;
    // After read_event returned false: what ended and what took its place (successor -1: nothing can).
    virtual ZygoteDeath replace() = 0;
    // Signals a child started through this launcher. REQUIRES pid > 0 and not yet reported EXITED.
    virtual void kill(pid_t pid, int signal) = 0;
    // Ends every child and the launcher; read_event then returns false. Idempotent.
    virtual void stop() = 0;
};

} // namespace canopy::daemon
