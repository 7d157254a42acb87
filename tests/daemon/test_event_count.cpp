#include "ipc/futex.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <mutex>
#include <thread>

using canopy::ipc::EventCount;
using Clock = std::chrono::steady_clock;

TEST_CASE("an event bumped between a waiter's read and its wait is not lost", "[daemon][events]") {
    EventCount events;
    const std::uint32_t seen = events.value();
    events.bump();
    // The counter moved after `seen` was read: the wait returns at once, deadline or not.
    events.wait_until(seen, Clock::time_point::max());
    CHECK(events.value() != seen);
}

TEST_CASE("a waiter is woken by a bump made under a mutex it never takes", "[daemon][events]") {
    EventCount events;
    std::mutex state_mu;
    bool ready = false;
    std::thread waiter([&] {
        for (;;) {
            const std::uint32_t seen = events.value();
            {
                std::lock_guard lock(state_mu);
                if (ready) {
                    return;
                }
            }
            events.wait_until(seen, Clock::time_point::max());
        }
    });
    {
        std::lock_guard lock(state_mu);
        ready = true;
        events.bump();
    }
    waiter.join(); // with a lost wake-up this join would hang and ctest's timeout would fail the test
    CHECK(ready);
}

TEST_CASE("an event wait ends at its deadline when nothing happens", "[daemon][events]") {
    EventCount events;
    const std::uint32_t seen = events.value();
    const auto deadline = Clock::now() + std::chrono::milliseconds(20);
    while (Clock::now() < deadline) {
        events.wait_until(seen, deadline);
    }
    CHECK(events.value() == seen);
    CHECK(Clock::now() >= deadline);
}
