#include "daemon/metrics.h"

#include "protocol/mailbox.h"
#include "protocol/version.h"

#include <sstream>

namespace canopy::daemon {
namespace {

// A label value with backslash, quote and newline escaped.
std::string label(const std::string& v) {
    std::string out;
    for (char c : v) {
        if (c == '\\' || c == '"') {
            out.push_back('\\');
            out.push_back(c);
        } else if (c == '\n') {
            out += "\\n";
        } else {
            out.push_back(c);
        }
    }
    return out;
}

} // namespace

void Metrics::task_finished(const std::string& state, const std::string& worker, double seconds) {
    std::lock_guard lock(mu_);
    ++tasks_by_state_[state];
    if (seconds > 0 && !worker.empty()) {
        Histogram& h = latency_[worker];
        for (std::size_t i = 0; i < BUCKETS.size(); ++i) {
            if (seconds <= BUCKETS[i]) {
                ++h.counts[i];
            }
        }
        ++h.count;
        h.sum += seconds;
    }
}

std::string Metrics::render(const std::vector<WorkerStatus>& workers, const std::vector<BufferInfo>& buffers,
                            const OwnerOf& owner_of) const {
    std::ostringstream out;
    out.precision(9);
    std::lock_guard lock(mu_);
    out << "# HELP canopy_build_info The release and wire ABI versions of this canopyd.\n"
           "# TYPE canopy_build_info gauge\n"
        << "canopy_build_info{version=\"" << label(std::string(canopy_version())) << "\",task_args=\""
        << TASK_ARGS_VERSION << "\",mailbox_layout=\"" << MAILBOX_LAYOUT_VERSION << "\"} 1\n";
    out << "# HELP canopy_tasks_total Tasks finished, by final state.\n# TYPE canopy_tasks_total counter\n";
    for (const char* state : {"completed", "failed", "rejected"}) {
        const auto it = tasks_by_state_.find(state);
        out << "canopy_tasks_total{state=\"" << state << "\"} " << (it == tasks_by_state_.end() ? 0 : it->second)
            << "\n";
    }
    out << "# HELP canopy_worker_up Whether a worker is running (1) or not (0).\n# TYPE canopy_worker_up gauge\n";
    for (const auto& w : workers) {
        out << "canopy_worker_up{worker=\"" << label(w.path) << "\",kind=\"" << w.kind << "\"} "
            << (w.state == WorkerState::RUNNING ? 1 : 0) << "\n";
    }
    out << "# HELP canopy_worker_restarts_total Restarts of a worker.\n# TYPE canopy_worker_restarts_total counter\n";
    for (const auto& w : workers) {
        out << "canopy_worker_restarts_total{worker=\"" << label(w.path) << "\"} " << w.restarts << "\n";
    }
    out << "# HELP canopy_worker_tasks_total Tasks a worker finished, by result.\n"
           "# TYPE canopy_worker_tasks_total counter\n";
    for (const auto& w : workers) {
        out << "canopy_worker_tasks_total{worker=\"" << label(w.path) << "\",result=\"completed\"} " << w.tasks_done
            << "\n";
        out << "canopy_worker_tasks_total{worker=\"" << label(w.path) << "\",result=\"failed\"} " << w.tasks_failed
            << "\n";
    }
    out << "# HELP canopy_worker_queued_tasks Tasks accepted for a worker and not yet in its mailbox.\n"
           "# TYPE canopy_worker_queued_tasks gauge\n";
    for (const auto& w : workers) {
        out << "canopy_worker_queued_tasks{worker=\"" << label(w.path) << "\"} " << w.queued << "\n";
    }
    out << "# HELP canopy_worker_in_flight_tasks Tasks in a worker's mailbox, running or next.\n"
           "# TYPE canopy_worker_in_flight_tasks gauge\n";
    for (const auto& w : workers) {
        out << "canopy_worker_in_flight_tasks{worker=\"" << label(w.path) << "\"} " << w.in_flight << "\n";
    }
    out << "# HELP canopy_task_duration_seconds Run time of tasks in their worker.\n"
           "# TYPE canopy_task_duration_seconds histogram\n";
    for (const auto& [worker, h] : latency_) {
        for (std::size_t i = 0; i < BUCKETS.size(); ++i) {
            out << "canopy_task_duration_seconds_bucket{worker=\"" << label(worker) << "\",le=\"" << BUCKETS[i]
                << "\"} " << h.counts[i] << "\n";
        }
        out << "canopy_task_duration_seconds_bucket{worker=\"" << label(worker) << "\",le=\"+Inf\"} " << h.count
            << "\n";
        out << "canopy_task_duration_seconds_sum{worker=\"" << label(worker) << "\"} " << h.sum << "\n";
        out << "canopy_task_duration_seconds_count{worker=\"" << label(worker) << "\"} " << h.count << "\n";
    }
    std::map<std::string, std::uint64_t> by_owner; // "daemon" for the daemon's own buffers
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> by_backend;
    for (const char* b : {"posix_shm", "cuda_vmm", "sim_vmm", "fork_shm", "fork_cow"}) {
        by_backend[b] = {0, 0};
    }
    for (const auto& b : buffers) {
        auto& [count, bytes] = by_backend[to_string(Backend{b.descriptor.backend})];
        ++count;
        const std::uint64_t held = b.descriptor.nbytes * std::max<std::size_t>(b.world.size(), 1);
        bytes += held;
        const auto uid = owner_of ? owner_of(b.descriptor.identity) : std::nullopt;
        by_owner[uid ? std::to_string(*uid) : "daemon"] += held;
    }
    out << "# HELP canopy_buffers Live buffers, by backend.\n# TYPE canopy_buffers gauge\n";
    for (const auto& [backend, v] : by_backend) {
        out << "canopy_buffers{backend=\"" << backend << "\"} " << v.first << "\n";
    }
    out << "# HELP canopy_buffer_bytes Bytes of live buffers, by backend.\n# TYPE canopy_buffer_bytes gauge\n";
    for (const auto& [backend, v] : by_backend) {
        out << "canopy_buffer_bytes{backend=\"" << backend << "\"} " << v.second << "\n";
    }
    out << "# HELP canopy_buffer_bytes_by_owner Bytes of live buffers, by the uid they belong to (\"daemon\": its "
           "own).\n# TYPE canopy_buffer_bytes_by_owner gauge\n";
    for (const auto& [owner, bytes] : by_owner) {
        out << "canopy_buffer_bytes_by_owner{owner=\"" << owner << "\"} " << bytes << "\n";
    }
    return out.str();
}

} // namespace canopy::daemon
