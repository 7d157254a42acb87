// What status() reports: every worker of the tree from the state the supervisor keeps, its nested nodes' trees
// from their last report, and each worker's queued and in-flight tasks.
#include "daemon/supervisor.h"

#include <map>

namespace canopy::daemon {

namespace {

// The workers of a nested node that is not running: from its topology, in the node's state.
void append_spec_workers(const ChildSlot& slot, std::vector<WorkerStatus>& out) {
    for (const ChildSpec& child : slot.spec.node->children) {
        WorkerStatus s;
        s.path = slot.spec.node->child_path(child.name);
        s.kind = to_string(child.kind);
        s.backend = child.kind == ChildKind::CUDA_CHIP ? "cuda" : child.kind == ChildKind::SIM_CHIP ? "sim" : "";
        s.device = child.device;
        s.state = slot.state == WorkerState::RUNNING ? WorkerState::STARTING : slot.state;
        s.last_exit = "node " + slot.path + " is " + to_string(slot.state);
        out.push_back(std::move(s));
    }
}

} // namespace

namespace {

// Tasks of a slot (its control frames left out) by the path below it they are for ("" for the child itself):
// queued, then in flight.
std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> tasks_by_target(const ChildSlot& slot) {
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> out;
    for (const auto& t : slot.pending) {
        if (t.kernel.empty() || t.kernel.front() != '@') {
            ++out[t.target].first;
        }
    }
    for (const auto& [dispatch, t] : slot.in_flight) {
        if (t.kernel.empty() || t.kernel.front() != '@') {
            ++out[t.target].second;
        }
    }
    return out;
}

} // namespace

std::vector<WorkerStatus> Supervisor::status() const {
    std::vector<WorkerStatus> out;
    const auto now = clock_->now();
    for (const auto& slot : slots_) {
        std::lock_guard lock(slot->mu);
        WorkerStatus s;
        s.path = slot->path;
        s.kind = to_string(slot->spec.kind);
        s.backend = slot->spec.kind == ChildKind::CUDA_CHIP  ? "cuda"
                    : slot->spec.kind == ChildKind::SIM_CHIP ? "sim"
                                                             : "";
        s.device = slot->spec.device;
        s.pid = slot->live ? slot->live->pid : -1;
        s.state = slot->state;
        s.restarts = slot->restarts;
        s.tasks_done = slot->tasks_done;
        s.tasks_failed = slot->tasks_failed;
        s.last_exit = slot->last_exit;
        if (slot->state == WorkerState::RUNNING) {
            s.uptime_s = std::chrono::duration<double>(now - slot->running_since).count();
        }
        const auto tasks = tasks_by_target(*slot);
        for (const auto& [target, counts] : tasks) {
            s.queued += counts.first;
            s.in_flight += counts.second;
        }
        out.push_back(std::move(s));
        if (slot->spec.kind != ChildKind::NODE && slot->spec.kind != ChildKind::REMOTE) {
            continue;
        }
        const bool reported = slot->state == WorkerState::RUNNING && slot->live && slot->live->reported;
        if (!reported) {
            if (slot->spec.kind == ChildKind::NODE) {
                append_spec_workers(*slot, out);
            }
            continue; // a remote node's workers are known from its host's report alone
        }
        const double age = std::chrono::duration<double>(now - slot->live->status_at).count();
        for (WorkerStatus nested : *slot->live->reported) {
            if (nested.state == WorkerState::RUNNING) {
                nested.uptime_s += age;
            }
            // Counted here, per task forwarded: the node's own counters start over when it restarts.
            const auto counts = nested.path.size() > slot->path.size()
                                    ? slot->nested_counts.find(nested.path.substr(slot->path.size() + 1))
                                    : slot->nested_counts.end();
            nested.tasks_done = counts == slot->nested_counts.end() ? 0 : counts->second.first;
            nested.tasks_failed = counts == slot->nested_counts.end() ? 0 : counts->second.second;
            const auto held = nested.path.size() > slot->path.size()
                                  ? tasks.find(nested.path.substr(slot->path.size() + 1))
                                  : tasks.end();
            nested.queued = held == tasks.end() ? 0 : held->second.first;
            nested.in_flight = held == tasks.end() ? 0 : held->second.second;
            out.push_back(std::move(nested));
        }
    }
    return out;
}

} // namespace canopy::daemon
