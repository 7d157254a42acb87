#pragma once
// Clock: the time a supervisor's lifecycle runs on — restart back-off, the healthy-uptime rule, task deadlines
// and worker uptimes. The daemon uses SteadyClock; tests drive the same policy with a clock they advance, so
// back-off and timeouts are checked without waiting for them.
//
// Thread safety: both methods may be called from any thread.

#include "ipc/futex.h"

#include <chrono>
#include <cstdint>

namespace canopy::daemon {

class Clock {
public:
    using time_point = std::chrono::steady_clock::time_point;
    using duration = std::chrono::steady_clock::duration;
    virtual ~Clock() = default;
    virtual time_point now() const noexcept = 0;
    // Returns once `events` has moved past `seen`, once now() has reached `until` (time_point::max(): never),
    // or spuriously; callers re-check their condition.
    virtual void wait_until(ipc::EventCount& events, std::uint32_t seen, time_point until) const noexcept = 0;
};

class SteadyClock final : public Clock {
public:
    time_point now() const noexcept override { return std::chrono::steady_clock::now(); }
    void wait_until(ipc::EventCount& events, std::uint32_t seen, time_point until) const noexcept override {
        events.wait_until(seen, until);
    }
};

} // namespace canopy::daemon
