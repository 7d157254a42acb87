#pragma once
// RestartPolicy: what a supervisor does when one of its children (or its zygote) dies. A death counts as a
// failure unless the child had stayed up for `healthy_uptime`, which starts the count over; the child
// restarts after an exponential back-off from `initial` (doubling per failure, capped at `max`) until it has
// failed more than `budget` times in a row, and is then dead. A death the child did not cause (its zygote
// died and took it along) restarts it after the initial back-off without counting.
//
// Thread safety: immutable; on_death is a pure function of its arguments.

#include <chrono>
#include <cstdint>

namespace canopy::daemon {

struct RestartDecision {
    bool restart = false;
    std::chrono::milliseconds delay{0}; // when restart
    std::uint32_t failures = 0;         // the failure count after this death
};

class RestartPolicy {
public:
    RestartPolicy(std::uint32_t budget, std::chrono::milliseconds initial, std::chrono::milliseconds max,
                  std::chrono::steady_clock::duration healthy_uptime)
        : budget_(budget), initial_(initial), max_(max), healthy_uptime_(healthy_uptime) {}

    // `failures`: the count before this death. `uptime`: how long the incarnation ran (zero if it never came
    // up). `fatal`: the child reported it cannot serve, so restarting cannot help. `caused`: false when the
    // death was not the child's doing.
    RestartDecision on_death(std::uint32_t failures, std::chrono::steady_clock::duration uptime, bool fatal,
                             bool caused) const;
    // A child that ended because what it stands for cannot be reached (a remote node's host): it restarts after
    // the back-off of its failures in a row (counted as on_death counts them), however many there were.
    RestartDecision on_lost(std::uint32_t failures, std::chrono::steady_clock::duration uptime) const;

private:
    std::uint32_t budget_;
    std::chrono::milliseconds initial_;
    std::chrono::milliseconds max_;
    std::chrono::steady_clock::duration healthy_uptime_;
};

} // namespace canopy::daemon
