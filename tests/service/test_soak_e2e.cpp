// The model-based soak (tests/service/soak.h) on a level-3 daemon and on a level-4 daemon with a nested node.

#include "soak.h"
#include "tests/sanitizers.h"

#include <catch2/catch.hpp>

using namespace canopy::e2e;
using nlohmann::json;

TEST_CASE("soak: clients' random requests at once keep every buffer equal to its model and every task done",
          "[service][soak]") {
    Daemon d(e2e_config(2, 2, {{"log", {{"level", "info"}}}}));
    soak(d, {{{"chip0", true, ""}, {"chip1", true, ""}, {"sub0", false, ""}, {"sub1", false, ""}}, {""}},
         canopy::testing::property_cases(1500));
}

TEST_CASE("soak: the same on a level-4 daemon whose tasks run on its own sub and a nested node's workers",
          "[service][soak]") {
    const json node = {
        {"name", "n0"}, {"level", 3}, {"chips", json::array({{{"device", 0}, {"backend", "sim"}}})}, {"subs", 1}};
    const json config = {{"node", {{"name", "soak"}, {"level", 4}, {"subs", 1}, {"nodes", json::array({node})}}},
                         {"log", {{"level", "info"}}}};
    Daemon d(config);
    soak(d, {{{"n0/chip0", true, ""}, {"sub0", false, ""}, {"n0/sub0", false, ""}}, {""}},
         canopy::testing::property_cases(1000));
}
