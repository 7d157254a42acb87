#pragma once
// Metrics: counters and per-worker latency histograms, rendered in the Prometheus text exposition
// format (version 0.0.4) for `canopy metrics` and the optional loopback HTTP listener.
//
// Thread safety: every method may be called from any thread (one internal mutex).

#include "daemon/buffer_registry.h"
#include "daemon/supervisor.h"

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace canopy::daemon {

class Metrics {
public:
    // Upper bounds of the latency buckets, in seconds.
    static constexpr std::array<double, 12> BUCKETS = {1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3,
                                                       1e-2, 5e-2, 0.1,  0.5,  1.0,  5.0};

    // A finished task: its final state ("completed", "failed", "rejected"), the worker it ran on and its
    // run time in the worker (0 when it never ran).
    void task_finished(const std::string& state, const std::string& worker, double seconds);

    // The uid a buffer belongs to; nullopt for the daemon's own buffers.
    using OwnerOf = std::function<std::optional<uid_t>(const CanonicalIdentity&)>;
    std::string render(const std::vector<WorkerStatus>& workers, const std::vector<BufferInfo>& buffers,
                       const OwnerOf& owner_of) const;

private:
    struct Histogram {
        std::array<std::uint64_t, BUCKETS.size()> counts{};
        std::uint64_t count = 0;
        double sum = 0;
    };

    mutable std::mutex mu_;
    std::map<std::string, std::uint64_t> tasks_by_state_;
    std::map<std::string, Histogram> latency_; // by worker path
};

} // namespace canopy::daemon
