#include "daemon/restart_policy.h"

#include <catch2/catch.hpp>

using canopy::daemon::RestartPolicy;
using std::chrono::milliseconds;
using std::chrono::seconds;

namespace {
const RestartPolicy POLICY(3, milliseconds(50), milliseconds(300), seconds(30));
}

TEST_CASE("restart back-off doubles per failure up to its cap", "[daemon][restart]") {
    std::uint32_t failures = 0;
    const long expected[] = {50, 100, 200};
    for (const long delay : expected) {
        const auto d = POLICY.on_death(failures, seconds(1), false, true);
        REQUIRE(d.restart);
        CHECK(d.delay == milliseconds(delay));
        failures = d.failures;
    }
    const RestartPolicy wide(10, milliseconds(50), milliseconds(300), seconds(30));
    CHECK(wide.on_death(3, seconds(1), false, true).delay == milliseconds(300));
    CHECK(wide.on_death(9, seconds(1), false, true).delay == milliseconds(300));
}

TEST_CASE("a child that fails past the budget is dead", "[daemon][restart]") {
    const auto d = POLICY.on_death(3, seconds(1), false, true);
    CHECK_FALSE(d.restart);
    CHECK(d.failures == 4);
    CHECK_FALSE(
        RestartPolicy(0, milliseconds(50), milliseconds(300), seconds(30)).on_death(0, {}, false, true).restart);
}

TEST_CASE("a child that stayed up long enough starts the count over", "[daemon][restart]") {
    const auto d = POLICY.on_death(3, seconds(30), false, true);
    REQUIRE(d.restart);
    CHECK(d.failures == 1);
    CHECK(d.delay == milliseconds(50));
}

TEST_CASE("a fatal child is never restarted", "[daemon][restart]") {
    CHECK_FALSE(POLICY.on_death(0, seconds(100), true, true).restart);
}

TEST_CASE("a death the child did not cause restarts it at once without counting", "[daemon][restart]") {
    const auto d = POLICY.on_death(3, {}, false, false);
    REQUIRE(d.restart);
    CHECK(d.failures == 3);
    CHECK(d.delay == milliseconds(50));
}

TEST_CASE("a child whose peer is lost restarts past any budget, backing off to the cap", "[daemon][restart]") {
    std::uint32_t failures = 0;
    const long expected[] = {50, 100, 200, 300, 300, 300};
    for (const long delay : expected) {
        const auto d = POLICY.on_lost(failures, {});
        REQUIRE(d.restart);
        CHECK(d.delay == milliseconds(delay));
        failures = d.failures;
    }
    CHECK(failures == 6); // past the budget of 3, still restarting
    CHECK(POLICY.on_lost(1000000, {}).restart);
    CHECK(POLICY.on_lost(1000000, {}).delay == milliseconds(300));
    // A link that stayed up long enough starts over at the first back-off.
    const auto fresh = POLICY.on_lost(5, seconds(30));
    CHECK(fresh.failures == 1);
    CHECK(fresh.delay == milliseconds(50));
}
