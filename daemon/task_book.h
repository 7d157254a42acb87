#pragma once
// TaskBook: the daemon's record of every task it accepted: name, kernel, worker, state, error and
// times, the request until it is dispatched, and who waits for it. Unfinished tasks are kept until they
// finish; finished ones are kept as history (the newest `history` of them, control.task_history) for
// `canopy tasks` and `wait`. The daemon's own steps (buffer transfers, not listed) leave no history.
//
// Thread safety: none; the Service holds its mutex around every call.

#include "daemon/control_server.h"
#include "daemon/task.h"

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace canopy::daemon {

// A client waiting for a set of tasks (a graph, or one task) with "wait": true. Each task's final state is
// written as JSON text when it finishes (history is bounded); the last one to finish sends the one reply,
// which lists them all in submission order.
struct TaskWaiter {
    std::vector<std::string> states;
    std::size_t remaining = 0;
    bool single = false; // a `submit`: the reply holds "task", not "tasks"
    Reply reply;
    // "progress": true: a Response::progress {"done", "failed", "total"} at most every PROGRESS_INTERVAL while
    // tasks finish, before the reply.
    bool progress = false;
    std::size_t failed = 0;
    std::chrono::steady_clock::time_point last_progress{};
    static constexpr std::chrono::milliseconds PROGRESS_INTERVAL{250};
};

struct TaskRecord {
    std::uint64_t id = 0;
    std::string name;
    std::string kernel;
    std::string on;
    std::string state = "queued"; // queued | running | completed | failed | rejected
    ErrorCode code = ErrorCode::OK;
    std::string message;
    std::uint64_t submitted_ns = 0;
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
    std::optional<TaskRequest> request; // until dispatched
    bool ordered = false;               // on a lane of the scheduler: its failure is kept until the Service saw it
    // A step the daemon runs itself instead of dispatching a request (buffer read/write): called once the
    // task is ready, outside the Service's lock; it reports its result through Service::on_result.
    std::function<void()> local;
    bool listed = true; // false for buffer transfers: ordered like tasks, but not tasks to `canopy tasks` or metrics
    // Run once the task finished, with its final state as JSON text (the record may be gone from history then).
    std::vector<std::function<void(const std::string& state)>> on_finish;
    std::shared_ptr<TaskWaiter> waiter; // with the task's position in waiter->states
    std::uint32_t position = 0;

    bool finished() const noexcept { return state == "completed" || state == "failed" || state == "rejected"; }
};

// A task's state as the control protocol lists it: {"name", "id", "kernel", "on", "state", "submitted_ns",
// "start_ns", "end_ns"} and, for a failed or rejected task, "error": {"code", "message"}. append_task_json
// writes the JSON text (the form replies carry); task_json parses that text.
void append_task_json(std::string& out, const TaskRecord& t);
nlohmann::json task_json(const TaskRecord& t);

class TaskBook {
public:
    explicit TaskBook(std::size_t history) : history_(history) {}

    TaskRecord& add(TaskRecord record);
    TaskRecord* find(std::uint64_t id);
    // Marks a task finished, moves it to history, records its state with its waiter (replying when it was the
    // waiter's last task) and returns the task's on_finish callbacks.
    std::vector<std::function<void()>> finish(std::uint64_t id, const std::string& state, ErrorCode code,
                                              std::string message, std::uint64_t start_ns, std::uint64_t end_ns);
    // Every task not yet finished and the history, by id, as the members of a `tasks` reply: `"tasks":[...]`. Text
    // written from the records, with no JSON tree between: the caller holds the service's lock meanwhile, and the
    // history may hold control.task_history (up to a million) tasks.
    std::string list_members() const;
    std::size_t unfinished() const noexcept { return live_.size(); }
    std::vector<std::uint64_t> unfinished_ids() const;

private:
    std::unordered_map<std::uint64_t, TaskRecord> live_;
    std::unordered_map<std::uint64_t, TaskRecord> done_;
    std::deque<std::uint64_t> done_order_;
    std::size_t history_;
};

} // namespace canopy::daemon
