#pragma once
// A task as the supervisor's C++ API takes it, and its result.
//
// Thread safety: plain values.

#include "protocol/error.h"
#include "protocol/mailbox.h"
#include "protocol/task_args.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace canopy::daemon {

struct TaskRequest {
    std::string kernel;
    std::string worker; // "chip0", "/chip0", "/node0/chip1"
    TaskArgs args;
    LaunchConfig launch{};
    std::uint64_t id = 0;                 // 0: the supervisor assigns one
    std::chrono::milliseconds timeout{0}; // 0: none. Counted from the moment the task reaches the front
                                          // of its worker's queue; on expiry the worker is killed and
                                          // restarted and the task fails with TIMEOUT
    // Tasks submitted before this one to the same worker that it is ordered after (Supervisor::lane): it runs
    // only if each of them succeeds, and fails DEPENDENCY_FAILED without running otherwise. Each must have been
    // submitted with keep_failure.
    std::vector<std::uint64_t> after{};
    // Keeps this task's failure for the tasks ordered after it until Supervisor::forget_failure.
    bool keep_failure = false;
    // Tasks submitted with one non-zero group can be taken back together while still queued
    // (Supervisor::withdraw): a remote node's L4 session is one group.
    std::uint64_t group = 0;
    // The kernel's signature was checked against these arguments (Supervisor::check passed, and nothing in the
    // request changed since): dispatch checks the buffers again, since a remote host's may be lost meanwhile, but
    // not the signature, which depends on the request alone. A buffer whose release began after the check is still
    // live to this task: the release waits for it.
    bool signature_checked = false;
};

struct TaskResult {
    std::uint64_t task_id = 0;
    ErrorCode code = ErrorCode::OK;
    std::string message;
    std::uint64_t start_ns = 0; // CLOCK_MONOTONIC in the worker; 0 when the task never ran
    std::uint64_t end_ns = 0;
    bool ok() const noexcept { return code == ErrorCode::OK; }
};

// Called exactly once per submitted task, on the submitting thread (rejections) or on a supervisor
// thread (results). Must not block for long.
using TaskCallback = std::function<void(TaskResult)>;

} // namespace canopy::daemon
