#pragma once
// Scheduler: dependency inference and the task lifecycle of docs/scheduler.md, in process. It has no
// processes, sockets or threads of its own: the daemon adds tasks in submission order, dispatches the
// ones pop_ready hands out, and reports how each ends.
//
// Rules. A new task depends on every earlier unfinished task that has an access to the same buffer
// identity where the two views may share a byte and at least one of the two writes (RAW, WAR, WAW). "May
// share a byte" is tensor_overlap(a, b) != NONE, narrowed where the row footprints of
// detail/footprint.h prove the views disjoint (pairs tensor_overlap cannot model, such as a column block
// and a row segment beside it); it holds for every pair that does share a byte, and depends on the two
// views alone. Reads never order against reads. A completed task makes ready every task left with no
// unfinished dependency. A failed task (failing a task is also how one is cancelled) fails every task that
// depends on it, transitively, with DEPENDENCY_FAILED; a task failed so is finished for every other task. A
// tolerant task is the exception: for it a failed dependency is one that has finished, as a completed one is, and
// the failure goes no further through it (the daemon's own steps over a buffer's bytes, such as a client's write,
// read or release, which must run whatever the tasks before them did).
//
// Lanes. A task may name the lane of the worker that runs it (a worker that runs what it is handed one task
// after another, in the order handed out). An edge from U to a later task T is ordered by the lane when both
// name the same lane and U has been handed out (RUNNING): the worker runs T after U, and fails T without
// running it if U failed. T is READY once every unfinished task it depends on is ordered so; without lanes,
// once each has finished. Handing out U orders its WAITING dependents of U's lane; ordered_after(T) lists the
// predecessors ordered so, for the worker's check. A failed task fails its WAITING and READY dependents; a
// RUNNING dependent is with its worker already, which fails it (the daemon reports that as its own result).
//
// Lifecycle: add -> WAITING or READY; pop_ready: READY -> RUNNING; complete: RUNNING -> COMPLETED;
// fail: WAITING, READY or RUNNING -> FAILED. A finished task is forgotten at once: its id is unknown from
// then on (the daemon may reuse it) and its storage is reused by later tasks; when the last unfinished task
// finishes, the scheduler returns all its storage to the allocator.
//
// Cost: add is O(log n) per tensor argument plus one step per outstanding access that may share a byte
// with it; complete and fail are O(log n) per access plus one step per dependent (docs/scheduler.md).
//
// Ownership: the scheduler copies the views it is given; it keeps no pointer into the caller's memory.
// Thread safety: none. The daemon serializes every call (one mutex around the scheduler).
// Errors: misuse (a duplicate id, an unknown or finished id, completing a task that is not RUNNING, a tag
// that is not a TensorTag) throws std::logic_error and changes nothing. std::bad_alloc changes nothing
// either: every call allocates before it changes any state, or undoes what it changed.

#include "protocol/error.h"
#include "protocol/task_args.h"
#include "scheduler/detail/access_index.h"
#include "scheduler/detail/ready_queue.h"
#include "scheduler/detail/task_table.h"
#include "scheduler/task_state.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace canopy::scheduler {

// A dependent failed by fail(), with its error message ("dependency 'init' (task 12) failed:
// KERNEL_FAILED"); its code is DEPENDENCY_FAILED.
using FailedTask = std::pair<TaskId, std::string>;

class Scheduler {
public:
    Scheduler() = default;
    Scheduler(const Scheduler&) = delete;
    Scheduler& operator=(const Scheduler&) = delete;
    Scheduler(Scheduler&&) = default;
    Scheduler& operator=(Scheduler&&) = default;

    // Adds a task after every earlier one. `name` is used in the messages of its failed dependents.
    // Returns true when the task is READY at once (no dependency its lane does not order); either way
    // pop_ready hands it out once it is READY. `lane`: the lane of the worker that runs it, or NO_LANE.
    // `tolerant`: the task waits for its dependencies to finish, however they end (see Rules).
    // REQUIRES every view passed validate_tensor (the submit checks run before).
    bool add(TaskId id, std::string_view name, std::span<const TensorArg> args, Lane lane = NO_LANE,
             bool tolerant = false);

    // The oldest READY task by submission order, now RUNNING; nullopt when none is READY. Tasks of its lane
    // that waited only for it and for other RUNNING tasks of that lane become READY.
    std::optional<TaskId> pop_ready();

    // Appends to `out` the tasks that `id` depends on through its lane (ordered, not waited for), in the order
    // they were ordered; some may have finished since. Throws std::logic_error for an unknown or finished id.
    void ordered_after(TaskId id, std::vector<TaskId>& out);

    // Finishes a RUNNING task successfully. Appends to `now_ready` the tasks that became READY, in
    // submission order; they are also handed out by pop_ready.
    void complete(TaskId id, std::vector<TaskId>& now_ready);

    // Finishes a WAITING, READY or RUNNING task as failed with `code`, and with it every WAITING or READY task
    // that depends on it, transitively (a RUNNING dependent is left to its worker), but for tolerant ones, which
    // it leaves waiting for their other dependencies (READY when none is left), among them the unfinished tasks
    // before it whose accesses the failed tasks' writes covered. Appends the failed dependents to
    // `failed_dependents` in submission order, each with the message "dependency 'NAME' (task ID) failed: CODE"
    // naming this task.
    void fail(TaskId id, ErrorCode code, std::vector<FailedTask>& failed_dependents);

    // The state of an unfinished task; nullopt for an unknown or finished one.
    std::optional<TaskState> state(TaskId id) const;
    // Tasks added and not yet finished.
    std::size_t unfinished() const noexcept { return tasks_.size(); }
    // Tasks that the task `id` still waits for before it can be handed out (0 unless WAITING): the unfinished
    // ones it depends on that its lane does not order; nullopt for an unknown or finished one.
    std::optional<std::size_t> waiting_for(TaskId id) const;

private:
    std::uint32_t checked_slot(TaskId id, const char* operation) const;
    void link_dependencies(std::uint32_t slot, std::span<const TensorArg> args);
    void index_accesses(std::uint32_t slot, std::span<const TensorArg> args);
    void abandon(std::uint32_t slot) noexcept;
    void order_dependents(detail::Node& node) noexcept;
    std::vector<std::uint32_t> collect_dependents(std::uint32_t root, std::vector<TaskState>& before);
    void unmark(const std::vector<std::uint32_t>& cascade, const std::vector<TaskState>& before) noexcept;
    // The edges from the tasks of `cascade` to tolerant tasks that the failure leaves unfinished.
    std::size_t tolerant_edges(const std::vector<std::uint32_t>& cascade) noexcept;
    // Counts the failed `node` as finished for its tolerant dependents, as complete() does for every dependent.
    void release_tolerant(detail::Node& node) noexcept;
    // A task of a failing `cascade` stands for the earlier tasks whose accesses its writes covered (pruned): a
    // later task linked to it alone. Its WAITING tolerant dependents, which the failure releases, must still
    // wait for those of them they conflict with (a view that may share a byte with the covered access, one of the
    // two writing): returns the links to add (owner slot, dependent), after reserving room for them.
    std::vector<std::pair<std::uint32_t, detail::Link>> covered_edges(const std::vector<std::uint32_t>& cascade);
    // Counts the task before `link` as finished for `dependent`; true when that made it READY (then queued for
    // pop_ready). REQUIRES ready_ has room for one more woken task.
    bool count_finished(const detail::Link& link, detail::Node& dependent) noexcept;
    void unindex(detail::Node& node) noexcept;
    void reinstate_pruned(detail::Node& node) noexcept;
    void finish(std::uint32_t slot) noexcept;
    void release_storage() noexcept;

    detail::TaskTable tasks_;
    detail::AccessIndex index_;
    detail::ReadyQueue ready_;                          // entries of tasks no longer READY are skipped
    std::vector<detail::AccessRef> prunable_;           // scratch of add()
    std::vector<detail::Footprint> footprints_;         // scratch of add(), one per tensor argument
    std::vector<detail::AccessIndex::Buffer*> buffers_; // scratch of add(): each argument's buffer entry or null
    std::uint64_t next_seq_ = 1;                        // submission numbers, never reused
};

} // namespace canopy::scheduler
