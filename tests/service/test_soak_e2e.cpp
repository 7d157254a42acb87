// The model-based soak (tests/service/soak.h) on a level-3 daemon, on a level-4 daemon with a nested node, and on a
// cuda chip.

#include "soak.h"
#include "tests/sanitizers.h"
#include "tests/skip.h"

#include <catch2/catch.hpp>
#include <filesystem>

using namespace canopy::e2e;
using nlohmann::json;

TEST_CASE("soak: clients' random requests at once keep every buffer equal to its model and every task done",
          "[service][soak]") {
    Daemon d(e2e_config(2, 2, {{"log", {{"level", "info"}}}}));
    soak(d, {{{"chip0", "sim", ""}, {"chip1", "sim", ""}, {"sub0", "", ""}, {"sub1", "", ""}}, {""}},
         canopy::testing::property_cases(1500));
}

TEST_CASE("soak: the same on a level-4 daemon whose tasks run on its own sub and a nested node's workers",
          "[service][soak]") {
    const json node = {
        {"name", "n0"}, {"level", 3}, {"chips", json::array({{{"device", 0}, {"backend", "sim"}}})}, {"subs", 1}};
    const json config = {{"node", {{"name", "soak"}, {"level", 4}, {"subs", 1}, {"nodes", json::array({node})}}},
                         {"log", {{"level", "info"}}}};
    Daemon d(config);
    soak(d, {{{"n0/chip0", "sim", ""}, {"sub0", "", ""}, {"n0/sub0", "", ""}}, {""}},
         canopy::testing::property_cases(1000));
}

TEST_CASE("soak: the same on a cuda chip beside a sim chip and a sub, with cuda_vmm buffers", "[service][soak][gpu]") {
    if (!std::filesystem::exists("/dev/nvidia0")) {
        CANOPY_SKIP("needs a GPU");
    }
    const json chips = json::array({{{"device", 0}, {"backend", "cuda"}}, {{"device", 1}, {"backend", "sim"}}});
    const json config = {{"node", {{"name", "gpu"}, {"level", 3}, {"chips", chips}, {"subs", 1}}},
                         {"log", {{"level", "info"}}}};
    Daemon d(config);
    soak(d, {{{"chip0", "cuda", ""}, {"chip1", "sim", ""}, {"sub0", "", ""}}, {""}},
         canopy::testing::property_cases(1500));
}
