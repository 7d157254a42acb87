// The config parser's bounds on the document itself: arrays and objects nest at most 64 levels deep, and a
// key appears once per object (more repeated-key cases: test_unknown_keys.cpp).

#include "config_test_util.h"

using canopy::config::testing::nested_arrays;
using canopy::config::testing::require_rejected;

namespace {

// "/0" repeated `n` times.
std::string zeros(std::size_t n) {
    std::string pointer;
    for (std::size_t i = 0; i < n; ++i) {
        pointer += "/0";
    }
    return pointer;
}

} // namespace

TEST_CASE("a config nested 100000 levels deep is refused at the pointer where it passes 64 levels", "[config]") {
    // The document is level 1, node 2 and subs 3: the container at level 65 is 62 arrays below subs.
    require_rejected(R"({"node": {"subs": )" + nested_arrays(100'000) + "}}", "/node/subs" + zeros(62),
                     "JSON nests deeper than 64 levels");
    require_rejected(nested_arrays(100'000), zeros(64), "JSON nests deeper than 64 levels");
}

TEST_CASE("a config nested exactly 64 levels deep reaches the schema checks", "[config]") {
    require_rejected(R"({"node": {"subs": )" + nested_arrays(62) + "}}", "/node/subs", "expected an integer");
}

TEST_CASE("a config repeating a key deep in a preload is refused at that key", "[config]") {
    require_rejected(R"({"node": {"subs": 1}, "preload": [{"name": "w", "path": "/a", "path": "/b"}]})",
                     "/preload/0/path", R"(/preload/0/path: duplicate key "path")");
}
