#pragma once
// The zygote: a single-threaded process forked by the supervisor before the supervisor starts any
// thread or could touch CUDA. It forks every child, first start and restart alike, so a restarted child
// inherits exactly what the first one did, and it reaps them and reports every exit.
//
// The standby: the zygote forks one copy of itself that does nothing but wait. It has the same memory
// image (the fork-inherited arenas at the same addresses, no thread, no CUDA), so when the zygote dies
// the supervisor promotes the standby to be the zygote, which forks a new standby of its own. A standby
// that dies is replaced by the zygote. The supervisor can therefore heal its tree after a zygote death,
// although it is itself multi-threaded and could not fork a clean zygote any more.
//
// Supervisor -> zygote: one SpawnRequest per message with the child's mailbox memfd and control socket
// attached. Zygote -> supervisor: ZygoteEvent SPAWNED (with the pid), SPAWN_FAILED (errno), EXITED (pid
// and wait status), STANDBY (a new standby's pid, with its socket and a pidfd attached) and
// STANDBY_EXITED (its wait status). When the supervisor closes its end or dies, the zygote SIGKILLs its
// children, reaps them and exits, and so does an idle standby; PR_SET_PDEATHSIG makes the kernel kill
// every child of a zygote that is itself killed.
//
// Thread safety: request_spawn and stop from any thread; read_event and replace from one thread (the
// supervisor's event thread).

#include "daemon/child_launcher.h"
#include "ipc/unique_fd.h"

#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <sys/types.h>

namespace canopy::daemon {

class Zygote final : public ChildLauncher {
public:
    // Forks the zygote, which forks its standby unless `standby` is false. REQUIRES: this process has
    // exactly one thread.
    explicit Zygote(ChildMain child_main, bool standby = true);
    Zygote(const Zygote&) = delete;
    Zygote& operator=(const Zygote&) = delete;
    ~Zygote();

    pid_t pid() const override;
    // The standby's pid, or -1 while there is none.
    pid_t standby_pid() const override;

    // Returns the epoch of the zygote that takes the request: the number of zygotes replaced before it.
    // Throws ipc::SysError when the zygote is gone.
    std::uint32_t request_spawn(const SpawnRequest& request, int mailbox_fd, int control_fd) override;

    // Blocks for the next event. A STANDBY event's fds are kept here. Returns false when the zygote
    // closed its end (it died, or stop() ran).
    bool read_event(ZygoteEvent& event) override;

    // After read_event returned false: reaps the dead zygote and promotes the standby, whose own new
    // standby is announced later by a STANDBY event. Without a standby, or after stop(), the zygote stays
    // gone (successor -1) and every request_spawn fails.
    ZygoteDeath replace() override;

    // Closes the request sockets (the zygote then kills and reaps every child and exits, and the standby
    // exits) and waits for both to be gone. Idempotent.
    void stop() override;
    // Sends `signal` to a child the zygote forked; its pid stays unreaped until the zygote reports the exit.
    void kill(pid_t pid, int signal) override;

private:
    // One zygote process as the supervisor holds it: its socket, and a pidfd when it is not our child.
    struct Process {
        pid_t pid = -1;
        ipc::UniqueFd socket;
        ipc::UniqueFd pidfd;
    };
    // Waits for `p` to be gone and returns how it ended.
    static std::string reap(Process& p);
    static void signal_process(const Process& p, int signal);

    mutable std::mutex mu_; // guards active_'s socket against replace() and stop(), and standby_
    Process active_;
    std::optional<Process> standby_;
    std::uint32_t epoch_ = 0;
    bool stopped_ = false;
};

} // namespace canopy::daemon
