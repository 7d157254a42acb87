#include "daemon/restart_policy.h"

#include <algorithm>

namespace canopy::daemon {

RestartDecision RestartPolicy::on_death(std::uint32_t failures, std::chrono::steady_clock::duration uptime, bool fatal,
                                        bool caused) const {
    if (fatal) {
        return {false, std::chrono::milliseconds(0), failures + 1};
    }
    if (!caused) {
        return {true, initial_, failures};
    }
    const std::uint32_t now_failing = uptime >= healthy_uptime_ ? 1 : failures + 1;
    if (now_failing > budget_) {
        return {false, std::chrono::milliseconds(0), now_failing};
    }
    const auto doubled = initial_ * (1LL << std::min<std::uint32_t>(now_failing - 1, 20));
    return {true, std::min<std::chrono::milliseconds>(doubled, max_), now_failing};
}

RestartDecision RestartPolicy::on_lost(std::uint32_t failures, std::chrono::steady_clock::duration uptime) const {
    const std::uint32_t now_failing = uptime >= healthy_uptime_ ? 1 : std::min<std::uint32_t>(failures + 1, 1000);
    const auto doubled = initial_ * (1LL << std::min<std::uint32_t>(now_failing - 1, 20));
    return {true, std::min<std::chrono::milliseconds>(doubled, max_), now_failing};
}

} // namespace canopy::daemon
