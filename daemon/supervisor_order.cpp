// Tasks ordered after others on one worker: a chip or sub runs the frames of its mailbox in order, so a task
// whose predecessors run on the same worker is queued at once and names them in its frame (TaskFrame::after);
// the worker fails it DEPENDENCY_FAILED when one of them failed. The supervisor keeps the other half of that
// promise: a task still queued here when a predecessor fails, or submitted after that failure, fails here, and a
// frame names only the predecessors still in the mailbox (the others have succeeded, or the task would have
// failed here).
#include "daemon/supervisor.h"

#include <algorithm>

namespace canopy::daemon {

std::uint32_t Supervisor::lane(const std::string& worker) const noexcept {
    std::string_view name = worker;
    while (!name.empty() && name.front() == '/') {
        name.remove_prefix(1);
    }
    for (const auto& slot : slots_) {
        if (slot->spec.name == name && slot->spec.kind == ChildKind::CUDA_CHIP) {
            return slot->index + 1;
        }
    }
    return 0;
}

void Supervisor::forget_failure(std::uint64_t task_id) {
    std::lock_guard lock(failures_mu_);
    kept_failures_.erase(task_id);
}

void Supervisor::note_failure(std::uint64_t task_id, bool keep_failure, ErrorCode code) {
    if (!keep_failure || code == ErrorCode::OK) {
        return;
    }
    std::lock_guard lock(failures_mu_);
    kept_failures_[task_id] = code;
}

std::optional<TaskResult> Supervisor::dependency_failure(std::uint64_t task_id,
                                                         const std::vector<std::uint64_t>& after) const {
    if (after.empty()) {
        return std::nullopt;
    }
    std::lock_guard lock(failures_mu_);
    for (const std::uint64_t predecessor : after) {
        const auto it = kept_failures_.find(predecessor);
        if (it != kept_failures_.end()) {
            return TaskResult{task_id, ErrorCode::DEPENDENCY_FAILED,
                              "dependency (task " + std::to_string(predecessor) +
                                  ", on the same worker) failed: " + std::string(error_code_name(it->second)),
                              0, 0};
        }
    }
    return std::nullopt;
}

// In queue order, so that a task failed here is seen as failed by the tasks queued after it.
void Supervisor::fail_ordered_pending_locked(ChildSlot& slot, std::vector<std::pair<TaskCallback, TaskResult>>& out) {
    for (auto it = slot.pending.begin(); it != slot.pending.end();) {
        std::optional<TaskResult> failed = dependency_failure(it->task_id, it->after);
        if (!failed) {
            ++it;
            continue;
        }
        count_result(slot, *it, failed->code);
        note_failure(*it, failed->code);
        out.emplace_back(std::move(it->done), std::move(*failed));
        it = slot.pending.erase(it);
    }
}

std::optional<std::vector<std::uint64_t>> Supervisor::frame_after_locked(const ChildSlot& slot,
                                                                         const PendingTask& task) const {
    std::vector<std::uint64_t> named;
    for (const std::uint64_t predecessor : task.after) {
        const bool in_mailbox = std::any_of(slot.in_flight.begin(), slot.in_flight.end(),
                                            [&](const auto& entry) { return entry.second.task_id == predecessor; });
        if (in_mailbox) {
            named.push_back(predecessor);
        }
    }
    if (named.size() > MAX_FRAME_AFTER) {
        return std::nullopt;
    }
    return named;
}

} // namespace canopy::daemon
