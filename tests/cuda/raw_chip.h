#pragma once
// A chip worker process served through a raw mailbox, without a supervisor: a cuda chip (run_cuda_chip) or a
// sim chip (run_worker), forked from the test process, so tests can send frames the supervisor's own checks
// would stop, and watch the process exit.
//
// REQUIRES: constructed while the test process has a single thread, and before the test process initialized
// CUDA (it never should).

#include "chip_fixture.h"
#include "ipc/child_message.h"
#include "ipc/fd_passing.h"
#include "ipc/mailbox_parent.h"
#include "worker/cuda/cuda_chip.h"
#include "worker/worker_loop.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <csignal>
#include <optional>
#include <sys/prctl.h>
#include <sys/wait.h>

namespace canopy::testing {

enum class RawKind { CUDA, SIM };

class RawChip {
public:
    explicit RawChip(RawKind kind, bool fault_kernels = false, std::uint32_t device = 0) {
        auto [ours, theirs] = ipc::seqpacket_pair();
        const pid_t parent = ::getpid();
        pid_ = ::fork();
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL);
            if (::getppid() != parent) {
                ::_exit(1);
            }
            ours.reset();
            worker::WorkerSpec spec;
            spec.kind = kernels::WorkerKind::CHIP;
            spec.path = "/chip0";
            spec.fault_kernels = fault_kernels;
            ipc::UniqueFd mailbox(::dup(mailbox_.fd()));
            ::_exit(kind == RawKind::CUDA ? worker::run_cuda_chip(spec, device, std::move(mailbox), std::move(theirs))
                                          : worker::run_worker(spec, std::move(mailbox), std::move(theirs)));
        }
        theirs.reset();
        control_ = std::move(ours);
        mailbox_.set_child_pid(pid_);
        ipc::ChildMessage m{};
        std::vector<ipc::UniqueFd> fds;
        const std::size_t n = ipc::recv_message(control_.get(), std::as_writable_bytes(std::span(&m, 1)), fds);
        ready_ = n == sizeof m && m.type == static_cast<std::uint32_t>(ipc::ChildMessageType::READY);
        if (!ready_) {
            fatal_ = std::string(m.text, std::min<std::size_t>(m.text_len, sizeof m.text));
        }
    }

    ~RawChip() {
        if (pid_ > 0 && !exited_) {
            mailbox_.request_shutdown();
            int status = 0;
            ::waitpid(pid_, &status, 0);
        }
    }

    RawChip(const RawChip&) = delete;
    RawChip& operator=(const RawChip&) = delete;

    bool ready() const noexcept { return ready_; }
    const std::string& fatal() const noexcept { return fatal_; }

    // Sends one frame and waits for its result.
    ipc::Completion run(std::string_view kernel, std::span<const std::byte> blob) {
        REQUIRE(mailbox_.can_submit());
        mailbox_.submit({++task_id_, kernel, "", {}, blob});
        while (!mailbox_.wait(0)) {
        }
        auto c = mailbox_.poll();
        REQUIRE(c.has_value());
        return *c;
    }

    ipc::Completion run(std::string_view kernel, const TaskArgs& args) { return run(kernel, encode_task_args(args)); }

    // Sends one frame without waiting for its result.
    void submit(std::string_view kernel, const TaskArgs& args) {
        REQUIRE(mailbox_.can_submit());
        const std::vector<std::byte> blob = encode_task_args(args);
        mailbox_.submit({++task_id_, kernel, "", {}, blob});
    }

    // The oldest result not yet taken, or nullopt when it did not come within `timeout`.
    std::optional<ipc::Completion> result_within(std::chrono::milliseconds timeout) {
        const auto until = std::chrono::steady_clock::now() + timeout;
        while (std::chrono::steady_clock::now() < until) {
            if (mailbox_.wait(10'000'000)) {
                return mailbox_.poll();
            }
        }
        return std::nullopt;
    }

    // Waits for the process to end; returns its wait status.
    int wait_exit() {
        int status = 0;
        REQUIRE(::waitpid(pid_, &status, 0) == pid_);
        exited_ = true;
        return status;
    }

    pid_t pid() const noexcept { return pid_; }

private:
    ipc::MailboxParent mailbox_{1};
    ipc::UniqueFd control_;
    pid_t pid_ = -1;
    bool ready_ = false;
    bool exited_ = false;
    std::string fatal_;
    std::uint64_t task_id_ = 0;
};

} // namespace canopy::testing
