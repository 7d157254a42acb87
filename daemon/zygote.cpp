#include "daemon/zygote.h"

#include "ipc/fd_passing.h"
#include "ipc/sys_error.h"

#include <cstdio>
#include <cstring>
#include <poll.h>
#include <set>
#include <signal.h>
#include <stdio_ext.h>
#include <sys/prctl.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
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

void send_event(int sock, const ZygoteEvent& e) {
    try {
        ipc::send_struct(sock, e);
    } catch (const ipc::SysError&) {
        // The supervisor is gone; the loop notices EOF next.
    }
}

class ZygoteLoop {
public:
    ZygoteLoop(int sock, ChildMain child_main) : sock_(sock), child_main_(std::move(child_main)) {}

    [[noreturn]] void run() {
        sigset_t mask;
        sigemptyset(&mask);
        sigaddset(&mask, SIGCHLD);
        ::sigprocmask(SIG_BLOCK, &mask, &old_mask_);
        sigfd_ = ipc::UniqueFd(ipc::sys_check(::signalfd(-1, &mask, SFD_CLOEXEC | SFD_NONBLOCK), "signalfd"));
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

    void reap() {
        signalfd_siginfo info;
        while (::read(sigfd_.get(), &info, sizeof info) == sizeof info) {
        }
        int status = 0;
        pid_t pid;
        while ((pid = ::waitpid(-1, &status, WNOHANG)) > 0) {
            children_.erase(pid);
            send_event(sock_, {ZygoteEventType::EXITED, 0, 0, pid, status, 0});
        }
    }

    [[noreturn]] void shutdown() {
        for (pid_t pid : children_) {
            ::kill(pid, SIGKILL);
        }
        while (::waitpid(-1, nullptr, 0) > 0 || errno == EINTR) {
        }
        ::_exit(0);
    }

    int sock_;
    ChildMain child_main_;
    ipc::UniqueFd sigfd_;
    sigset_t old_mask_{};
    std::set<pid_t> children_;
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

Zygote Zygote::start(ChildMain child_main) {
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
        ZygoteLoop loop(theirs.release(), std::move(child_main));
        loop.run();
    }
    return Zygote(pid, std::move(ours));
}

Zygote::~Zygote() {
    stop();
}

void Zygote::request_spawn(const SpawnRequest& request, int mailbox_fd, int control_fd) {
    const int fds[2] = {mailbox_fd, control_fd};
    ipc::send_struct(socket_.get(), request, fds);
}

bool Zygote::read_event(ZygoteEvent& event) {
    std::vector<ipc::UniqueFd> fds;
    const std::size_t n = ipc::recv_message(socket_.get(), std::as_writable_bytes(std::span(&event, 1)), fds);
    return n == sizeof event;
}

void Zygote::stop() {
    if (pid_ <= 0) {
        return;
    }
    ::shutdown(socket_.get(), SHUT_RDWR);
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    socket_.reset();
    pid_ = -1;
}

} // namespace canopy::daemon
