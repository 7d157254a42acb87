#pragma once
// TaskFuture and GraphFuture: the result of a task or a graph submitted without waiting (Connection::submit,
// Connection::run), to wait on later.
//
// How they wait: with the `wait` request (docs/control-protocol.md), sent over connections of their own, never over
// the Connection that submitted the work, which stays free for other requests meanwhile. Every future of one
// Connection shares a pool of such connections (opened to the same socket on first need, kept for reuse, one per
// wait in progress), so futures may be waited on from several threads at once, each wait on its own connection.
// Once a future has seen its task(s) finished it keeps the final state and asks the daemon no more.
//
// A future outlives its Connection. The daemon remembers finished tasks only so long (control.task_history): a wait
// for a task finished longer ago is an Error (BAD_REQUEST); wait early, or keep the final state.
//
// Thread safety: one future is used by one thread at a time; different futures from any threads.

#include "client/types.h"

#include <chrono>
#include <memory>
#include <optional>
#include <vector>

namespace canopy::client {

namespace detail {
class WaitPool;
}

class TaskFuture {
public:
    TaskFuture(std::shared_ptr<detail::WaitPool> pool, TaskState submitted);

    std::uint64_t id() const noexcept { return state_.id; }
    // The last state seen: the one the submit reply gave, until a wait saw a later one.
    const TaskState& state() const noexcept { return state_; }
    // True once the task has finished (asks the daemon, without waiting, until it has).
    bool ready();
    // The final state, once the task has finished. Task failures are states, not exceptions.
    const TaskState& wait();
    // The final state, or nullopt when the task has not finished within `timeout` (at most a day per request; longer
    // timeouts take several).
    std::optional<TaskState> wait_for(std::chrono::milliseconds timeout);
    // The final state of a task that completed; throws TaskError for one that failed or was rejected.
    const TaskState& get();

private:
    std::shared_ptr<detail::WaitPool> pool_;
    TaskState state_;
};

class GraphFuture {
public:
    GraphFuture(std::shared_ptr<detail::WaitPool> pool, std::vector<TaskState> submitted);

    // The graph's tasks in graph order, as last seen.
    const std::vector<TaskState>& states() const noexcept { return states_; }
    bool ready();
    // Every task's final state, in graph order.
    const std::vector<TaskState>& wait();
    // nullopt when some task has not finished within `timeout`.
    std::optional<std::vector<TaskState>> wait_for(std::chrono::milliseconds timeout);
    // As wait(); throws TaskError for the first task in graph order that failed or was rejected on its own (not
    // DEPENDENCY_FAILED, nor a graph's "not run" rejection), else for the first that failed.
    const std::vector<TaskState>& get();

private:
    // Asks about every unfinished task, in requests of at most 100 000 ids; true once all have finished.
    bool refresh(std::optional<std::chrono::milliseconds> timeout);

    std::shared_ptr<detail::WaitPool> pool_;
    std::vector<TaskState> states_;
};

} // namespace canopy::client
