#pragma once
// The values of the control protocol (docs/control-protocol.md) as the client library hands them out. Each reply
// value keeps the JSON object it was read from (`json`), so fields a newer daemon adds are not lost; the typed
// members are read from it and checked (a missing or mistyped one is a ProtocolError naming it).
//
// Thread safety: plain values.

#include "client/error.h"

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace canopy::client {

// A task's state: queued and running ones are not finished; completed, failed and rejected ones are final.
enum class TaskStatus { QUEUED, RUNNING, COMPLETED, FAILED, REJECTED };

// TASKSTATE.
struct TaskState {
    std::uint64_t id = 0;
    std::string name;
    std::string kernel;
    std::string on;
    TaskStatus status = TaskStatus::QUEUED;
    // For a failed or rejected task: the error, as for Error.
    std::optional<ErrorCode> error_code;
    std::string error_code_name;
    std::string error_message;
    std::uint64_t submitted_ns = 0;
    std::uint64_t start_ns = 0; // the worker's CLOCK_MONOTONIC; 0 until it ran
    std::uint64_t end_ns = 0;
    nlohmann::json json;

    bool finished() const noexcept { return status != TaskStatus::QUEUED && status != TaskStatus::RUNNING; }
    bool failed() const noexcept { return status == TaskStatus::FAILED || status == TaskStatus::REJECTED; }
};

// "queued", "running", "completed", "failed", "rejected".
const char* to_string(TaskStatus status) noexcept;

// A task that failed or was rejected, thrown by TaskFuture::get and GraphFuture::get.
class TaskError : public Error {
public:
    explicit TaskError(TaskState task);
    const TaskState& task() const noexcept { return task_; }

private:
    TaskState task_;
};

// BUFFER.
struct BufferInfo {
    std::string id;
    std::string backend; // "posix_shm", "sim_vmm", "cuda_vmm", "fork_shm", "fork_cow"
    std::uint64_t nbytes = 0;
    std::string access; // "r", "w", "rw"
    std::uint64_t device = 0;
    std::vector<std::string> world;
    std::string name;
    std::string creator;
    std::optional<std::uint32_t> owner_uid; // nullopt for the daemon's own buffers
    nlohmann::json json;
};

// One worker of `status`.
struct WorkerInfo {
    std::string path;
    std::string kind;    // "chip", "sub", "node"
    std::string backend; // "sim", "cuda", ""
    std::string state;   // "starting", "running", "restarting", "dead", "stopped"
    std::int64_t pid = 0;
    std::uint64_t restarts = 0;
    std::uint64_t tasks_done = 0;
    std::uint64_t tasks_failed = 0;
    nlohmann::json json;
};

struct Status {
    std::string node_name;
    int level = 0;
    std::int64_t pid = 0;
    double uptime_s = 0;
    std::vector<WorkerInfo> workers;
    nlohmann::json json;

    // True when every worker of the tree is running.
    bool all_running() const noexcept;
};

// MODULE.
struct ModuleInfo {
    std::string name;
    std::uint64_t bytes = 0;
    std::string format; // "ptx", "cubin", "fatbin"
    std::vector<std::string> chips;
    nlohmann::json json;
};

// The reply to `wait`: each task as it is when the reply was made; timed_out when the timeout passed first.
struct WaitResult {
    std::vector<TaskState> tasks;
    bool timed_out = false;
};

// One task of a `cancel` reply and what became of it: "cancelled", "running" (it will finish) or "finished".
struct CancelOutcome {
    TaskState task;
    std::string outcome;
};

// `buffer.create`; a field left empty is left out of the request, taking the daemon's default.
// Members have default initializers, so that designated initializers may name any subset:
// create_buffer({.bytes = 4096, .backend = "vmm", .on = "chip0"}).
struct BufferSpec {
    std::uint64_t bytes = 0;
    std::string backend{}; // "shm" (default), "vmm", "symmetric"
    std::string on{};      // the creating worker
    std::vector<std::string> world{};
    std::string access{}; // "r", "w", "rw" (default)
};

// What a buffer.read with an attachment returned: `bytes` bytes of the buffer, `rest` bytes after them, and
// whether the end of the buffer cut the read short.
struct ReadResult {
    std::uint64_t bytes = 0;
    std::uint64_t rest = 0;
    bool cut_short = false;
};

} // namespace canopy::client
