#include "daemon/zygote.h"

#include "ipc/fd_passing.h"
#include "ipc/sys_error.h"

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <poll.h>
#include <set>
#include <signal.h>
#include <stdio_ext.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

namespace canopy::daemon {
namespace {

// Makes the calling process die with SIGKILL when its parent dies; exits at once if the parent
// already died between fork and this call.
void die_with_parent(pid_t expected_parent) {
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (::getppid() != expected_parent) {
        ::_exit(70);
    }
}

// Restores the default action of every fault signal, unblocks them all and drops any alternate signal
// stack, so that a child killed by a fault dies by that signal whatever the supervisor's process had
// set up.
void reset_signal_handlers() {
    for (int sig = 1; sig < NSIG; ++sig) {
        if (sig != SIGKILL && sig != SIGSTOP) {
            ::signal(sig, SIG_DFL);
        }
    }
    stack_t none{};
    none.ss_flags = SS_DISABLE;
    ::sigaltstack(&none, nullptr);
    sigset_t nothing;
    sigemptyset(&nothing);
    ::sigprocmask(SIG_SETMASK, &nothing, nullptr);
    // The zygote and the children stop when their supervisor tells them or dies, not when a terminal's
    // Ctrl-C or a stop signal sent to the whole process group or cgroup reaches them.
    for (int sig : {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGPIPE}) {
        ::signal(sig, SIG_IGN);
    }
}

void send_event(int sock, const ZygoteEvent& e, std::span<const int> fds = {}) {
    try {
        ipc::send_struct(sock, e, fds);
    } catch (const ipc::SysError&) {
        // The supervisor is gone; the loop notices EOF next.
    }
}

// The message that turns a standby into the zygote.
constexpr SpawnRequest ACTIVATE{UINT32_MAX, UINT32_MAX};

class ZygoteLoop {
public:
    ZygoteLoop(int sock, ChildMain child_main, bool standby)
        : sock_(sock), child_main_(std::move(child_main)), want_standby_(standby) {}

    [[noreturn]] void run() {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        ::sigprocmask(SIG_BLOCK, &mask, &old_mask_);
        sigfd_ = ipc::UniqueFd(ipc::sys_check(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK), "signalfd"));
        fork_standby();
        for (;;) {
            pollfd fds[2] = {{sock_, POLLIN, 0}, {sigfd_.get(), POLLIN, 0}};
            if (::poll(fds, 2, -1) < 0) {
                continue; // EINTR
            }
            if (fds[1].revents != 0) {
                reap();
            }
            if (fds[0].revents != 0 && !serve_request()) {
                shutdown();
            }
        }
    }

private:
    bool serve_request() {
        SpawnRequest req{};
        std::vector<ipc::UniqueFd> fds;
        std::size_t n = 0;
        try {
            n = ipc::recv_message(sock_, std::as_writable_bytes(std::span(&req, 1)), fds);
        } catch (const ipc::FdsTruncated& e) {
            // This process is out of fds: the request fails, the zygote stays.
            const std::uint32_t index = e.bytes == sizeof req ? req.child_index : 0;
            const std::uint32_t generation = e.bytes == sizeof req ? req.generation : 0;
            send_event(sock_, {ZygoteEventType::SPAWN_FAILED, index, generation, -1, EMFILE, 0});
            return true;
        } catch (const std::exception&) {
            return false;
        }
        if (n == 0) {
            return false;
        }
        if (n != sizeof req || fds.size() != 2) {
            send_event(sock_, {ZygoteEventType::SPAWN_FAILED, req.child_index, req.generation, -1, EINVAL, 0});
            return true;
        }
        if (standby_pid_ < 0) {
            fork_standby(); // the last attempt failed; a spawn request is the next chance
        }
        const pid_t self = ::getpid();
        const pid_t pid = ::fork();
        if (pid < 0) {
            send_event(sock_, {ZygoteEventType::SPAWN_FAILED, req.child_index, req.generation, -1, errno, 0});
            return true;
        }
        if (pid == 0) {
            run_child(self, req, std::move(fds[0]), std::move(fds[1]));
        }
        children_.insert(pid);
        send_event(sock_, {ZygoteEventType::SPAWNED, req.child_index, req.generation, pid, 0, 0});
        return true;
    }

    [[noreturn]] void run_child(pid_t zygote, const SpawnRequest& req, ipc::UniqueFd mailbox, ipc::UniqueFd control) {
        die_with_parent(zygote);
        ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
        ::close(sock_);
        sigfd_.reset();
        int rc = 0;
        try {
            rc = child_main_(req, std::move(mailbox), std::move(control));
        } catch (const std::exception& e) {
            ::dprintf(2, "canopy child %u: %s\n", req.child_index, e.what());
            rc = 1;
        }
        std::fflush(nullptr);
        ::_exit(rc);
    }

    // Forks the standby and hands the supervisor its socket and a pidfd (the standby is this process's
    // child, so its pid cannot be reused before the pidfd exists). A failed fork leaves no standby.
    void fork_standby() {
        if (!want_standby_) {
            return;
        }
        int pair[2];
        if (::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, pair) != 0) {
            return;
        }
        ipc::UniqueFd theirs(pair[0]);
        ipc::UniqueFd mine(pair[1]);
        const pid_t pid = ::fork();
        if (pid < 0) {
            return;
        }
        if (pid == 0) {
            ::close(sock_);
            sigfd_.reset();
            theirs.reset();
            ::sigprocmask(SIG_SETMASK, &old_mask_, nullptr);
            wait_as_standby(mine.release());
        }
        mine.reset();
        standby_pid_ = pid;
        const ipc::UniqueFd pidfd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
        const int fds[2] = {theirs.get(), pidfd.get()};
        send_event(sock_, {ZygoteEventType::STANDBY, 0, 0, pid, 0, 0}, std::span<const int>(fds, pidfd ? 2 : 1));
    }

    // The standby: waits until the supervisor promotes it (then it is the zygote) or goes away (then it
    // exits).
    [[noreturn]] void wait_as_standby(int sock) {
        ::prctl(PR_SET_NAME, "canopy-standby");
        for (;;) {
            SpawnRequest req{};
            std::vector<ipc::UniqueFd> fds;
            std::size_t n = 0;
            try {
                n = ipc::recv_message(sock, std::as_writable_bytes(std::span(&req, 1)), fds);
            } catch (const std::exception&) {
                ::_exit(0);
            }
            if (n == 0) {
                ::_exit(0);
            }
            if (n == sizeof req && req.child_index == ACTIVATE.child_index && req.generation == ACTIVATE.generation) {
                ::prctl(PR_SET_NAME, "canopy-zygote");
                ZygoteLoop loop(sock, std::move(child_main_), want_standby_);
                loop.run();
            }
        }
    }

    void reap() {
        signalfd_siginfo info;
        while (::read(sigfd_.get(), &info, sizeof info) == sizeof info) {
        }
        int status = 0;
        pid_t pid;
        while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
            if (pid == standby_pid_) {
                standby_pid_ = -1;
                send_event(sock_, {ZygoteEventType::STANDBY_EXITED, 0, 0, pid, status, 0});
                // A standby exits 0 when the supervisor dropped its socket, which happens when the supervisor
                // could not receive it (out of fds); forking the next one at the next spawn request, not now,
                // keeps that from turning into a fork loop while the shortage lasts.
                if (!(WIFEXITED(status) && WEXITSTATUS(status) == 0)) {
                    fork_standby();
                }
                continue;
            }
            children_.erase(pid);
            send_event(sock_, {ZygoteEventType::EXITED, 0, 0, pid, status, 0});
        }
    }

    [[noreturn]] void shutdown() {
        for (pid_t pid : children_) {
            ::kill(pid, SIGKILL);
        }
        if (standby_pid_ > 0) {
            ::kill(standby_pid_, SIGKILL);
        }
        while (::waitpid(-1, nullptr, 0) > 0 || errno == EINTR) {
        }
        ::_exit(0);
    }

    int sock_;
    ChildMain child_main_;
    bool want_standby_;
    ipc::UniqueFd sigfd_;
    sigset_t old_mask_{};
    std::set<pid_t> children_;
    pid_t standby_pid_ = -1;
};

} // namespace

std::string describe_wait_status(int status) {
    if (WIFEXITED(status)) {
        return "exited with code " + std::to_string(WEXITSTATUS(status));
    }
    if (WIFSIGNALED(status)) {
        const int sig = WTERMSIG(status);
        const char* name = ::sigabbrev_np(sig);
        return "killed by signal " + std::to_string(sig) + " (SIG" + (name ? name : "?") + ")";
    }
    return "stopped with wait status " + std::to_string(status);
}

Zygote::Zygote(ChildMain child_main, bool standby) {
    auto [ours, theirs] = ipc::seqpacket_pair();
    const pid_t parent = ::getpid();
    const pid_t pid = ipc::sys_check(::fork(), "fork(zygote)");
    if (pid == 0) {
        die_with_parent(parent);
        reset_signal_handlers();
        // Output the supervisor had buffered but not written belongs to the supervisor alone.
        __fpurge(stdout);
        __fpurge(stderr);
        ::prctl(PR_SET_NAME, "canopy-zygote");
        ours.reset();
        ZygoteLoop loop(theirs.release(), std::move(child_main), standby);
        loop.run();
    }
    active_.pid = pid;
    active_.socket = std::move(ours);
}

Zygote::~Zygote() {
    stop();
}

pid_t Zygote::pid() const {
    std::lock_guard lock(mu_);
    return active_.pid;
}

pid_t Zygote::standby_pid() const {
    std::lock_guard lock(mu_);
    return standby_ ? standby_->pid : -1;
}

std::uint32_t Zygote::request_spawn(const SpawnRequest& request, int mailbox_fd, int control_fd) {
    const int fds[2] = {mailbox_fd, control_fd};
    std::lock_guard lock(mu_);
    ipc::send_struct(active_.socket.get(), request, fds);
    return epoch_;
}

bool Zygote::read_event(ZygoteEvent& event) {
    int sock = -1;
    {
        std::lock_guard lock(mu_);
        sock = active_.socket.get();
    }
    std::vector<ipc::UniqueFd> fds;
    std::size_t n = 0;
    try {
        n = ipc::recv_message(sock, std::as_writable_bytes(std::span(&event, 1)), fds);
    } catch (const ipc::FdsTruncated& e) {
        // This process is out of fds. The event itself arrived; only a STANDBY carries fds, and a standby
        // whose socket was lost sees EOF and exits, so it is reported with STANDBY_LOST and not kept.
        if (e.bytes != sizeof event) {
            throw;
        }
        if (event.type == ZygoteEventType::STANDBY) {
            event.status = STANDBY_LOST;
        }
        return true;
    }
    if (n != sizeof event) {
        return false;
    }
    std::lock_guard lock(mu_);
    if (event.type == ZygoteEventType::STANDBY && !fds.empty()) {
        standby_ = Process{};
        standby_->pid = event.pid;
        standby_->socket = std::move(fds[0]);
        if (fds.size() > 1) {
            standby_->pidfd = std::move(fds[1]);
        }
        if (stopped_) {
            ::shutdown(standby_->socket.get(), SHUT_RDWR);
        }
    } else if (event.type == ZygoteEventType::STANDBY_EXITED && standby_ && standby_->pid == event.pid) {
        standby_.reset(); // reaped by the zygote
    }
    return true;
}

ZygoteDeath Zygote::replace() {
    std::lock_guard lock(mu_);
    // The zygote may still be alive when its socket failed in some other way than EOF: it is ended first, so
    // that the reap below cannot wait forever.
    signal_process(active_, SIGKILL);
    ZygoteDeath dead{active_.pid, reap(active_), -1, epoch_};
    if (stopped_ || !standby_) {
        return dead;
    }
    try {
        ipc::send_struct(standby_->socket.get(), ACTIVATE);
    } catch (const ipc::SysError&) {
        reap(*standby_);
        standby_.reset();
        return dead;
    }
    active_ = std::move(*standby_);
    standby_.reset();
    dead.successor = active_.pid;
    dead.epoch = ++epoch_;
    return dead;
}

void Zygote::signal_process(const Process& p, int signal) {
    if (p.pid <= 0) {
        return;
    }
    if (p.pidfd) {
        // Not our child: its pid may be reused once whoever adopted it reaps it, the pidfd may not.
        ::syscall(SYS_pidfd_send_signal, p.pidfd.get(), signal, nullptr, 0);
    } else {
        ::kill(p.pid, signal); // our child, not yet reaped, so the pid is still its own
    }
}

std::string Zygote::reap(Process& p) {
    if (p.pid <= 0) {
        return {};
    }
    std::string how;
    if (!p.pidfd) {
        int status = 0;
        pid_t got;
        while ((got = ::waitpid(p.pid, &status, 0)) < 0 && errno == EINTR) {
        }
        if (got == p.pid) {
            how = describe_wait_status(status);
        }
    } else {
        // Not our child: its end is seen through the pidfd, and its wait status goes to whoever adopted it.
        pollfd pfd{p.pidfd.get(), POLLIN, 0};
        while (::poll(&pfd, 1, -1) < 0 && errno == EINTR) {
        }
    }
    p.pid = -1;
    return how;
}

void Zygote::kill(pid_t pid, int signal) {
    if (pid > 0) { // never kill(0) or kill(-1), which reach process groups
        ::kill(pid, signal);
    }
}

void Zygote::stop() {
    std::lock_guard lock(mu_);
    stopped_ = true;
    if (active_.socket) {
        ::shutdown(active_.socket.get(), SHUT_RDWR);
    }
    if (standby_ && standby_->socket) {
        ::shutdown(standby_->socket.get(), SHUT_RDWR);
    }
    reap(active_);
    if (standby_) {
        reap(*standby_);
    }
}

} // namespace canopy::daemon
