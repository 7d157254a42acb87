// CANOPY_SPIN: canopyd logs whether its long waits spin, and why, and serves either way.
#include "fixture.h"
#include "helpers.h"
#include "ipc/cpus.h"

#include <catch2/catch.hpp>

using namespace canopy::e2e;

namespace {

// What canopyd logs at start when it decides by its usable CPUs, which it inherits from this thread.
std::string by_cpus() {
    const unsigned cpus = canopy::ipc::usable_cpus();
    return std::string(cpus >= canopy::ipc::SPARE_CPUS_FROM ? "on" : "off") + " (" + std::to_string(cpus) +
           " usable CPUs";
}

} // namespace

TEST_CASE("canopyd logs whether its waits spin long: as CANOPY_SPIN says, else by its usable CPUs, warning of a "
          "value it does not know",
          "[service][spin]") {
    struct Case {
        const char* value;
        std::string line;
    };
    const std::vector<Case> cases = {
        {"on", "info spinning waits: on (CANOPY_SPIN=on)"},
        {"off", "info spinning waits: off (CANOPY_SPIN=off)"},
        {"auto", "info spinning waits: " + by_cpus() + ")"},
        {"", "info spinning waits: " + by_cpus() + ")"},
        {"yes", "warning spinning waits: " + by_cpus() + "; CANOPY_SPIN=\"yes\" is not on, off or auto)"},
    };
    for (const Case& c : cases) {
        INFO("CANOPY_SPIN=" << c.value);
        Daemon d(e2e_config(1, 1), {{"CANOPY_SPIN", c.value}});
        // It serves the same: a task on a chip and one on a sub.
        CHECK(d.cli({"submit", "sleep_ms", "--on", "chip0", "--scalar", "int64:0", "--wait"}).rc == 0);
        CHECK(d.cli({"submit", "sleep_ms", "--on", "sub0", "--scalar", "int64:0", "--wait"}).rc == 0);
        const std::string log = d.log();
        INFO(log);
        CHECK(log.find(c.line) != std::string::npos);
    }
}
