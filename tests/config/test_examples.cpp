// Every file under config/examples parses and has the shape its name promises.

#include "config_test_util.h"

using canopy::config::ChipBackend;
using canopy::config::ChipConfig;
using canopy::config::Config;
using canopy::config::load_config;

namespace {

const std::filesystem::path EXAMPLES = CANOPY_EXAMPLES_DIR;

std::vector<ChipConfig> chips(ChipBackend backend, std::uint32_t count) {
    std::vector<ChipConfig> list;
    for (std::uint32_t device = 0; device < count; ++device) {
        list.push_back({device, backend});
    }
    return list;
}

void check_paths_under_canopy(const Config& config) {
    CHECK(config.control.socket.string().starts_with("/run/canopy/"));
    CHECK(config.state_dir.string().starts_with("/var/lib/canopy"));
}

} // namespace

TEST_CASE("the one-gpu example has one cuda chip and two subs", "[config]") {
    const Config config = load_config(EXAMPLES / "one-gpu.json");
    CHECK(config.node.level == 3);
    CHECK(config.node.chips == chips(ChipBackend::CUDA, 1));
    CHECK(config.node.subs == 2);
    CHECK(config.node.nodes.empty());
    check_paths_under_canopy(config);
}

TEST_CASE("the eight-gpus example has eight cuda chips, four subs, two uids and metrics", "[config]") {
    const Config config = load_config(EXAMPLES / "eight-gpus.json");
    CHECK(config.node.level == 3);
    CHECK(config.node.chips == chips(ChipBackend::CUDA, 8));
    CHECK(config.node.subs == 4);
    CHECK(config.control.allow_uids.size() == 2);
    REQUIRE(config.metrics.listen.has_value());
    CHECK(config.metrics.listen->host == "127.0.0.1");
    CHECK(config.metrics.listen->port == 9464);
    check_paths_under_canopy(config);
}

TEST_CASE("the l4-two-nodes example has one sub and two nested nodes of two sim chips and two subs", "[config]") {
    const Config config = load_config(EXAMPLES / "l4-two-nodes.json");
    CHECK(config.node.level == 4);
    CHECK(config.node.chips.empty());
    CHECK(config.node.subs == 1);
    REQUIRE(config.node.nodes.size() == 2);
    CHECK(config.node.nodes[0].name == "node0");
    CHECK(config.node.nodes[1].name == "node1");
    for (const auto& node : config.node.nodes) {
        CHECK(node.level == 3);
        CHECK(node.chips == chips(ChipBackend::SIM, 2));
        CHECK(node.subs == 2);
        CHECK(node.nodes.empty());
    }
    check_paths_under_canopy(config);
}

TEST_CASE("the cpu example is cpu-host with two sim chips and two subs", "[config]") {
    const Config config = load_config(EXAMPLES / "cpu.json");
    CHECK(config.node.name == "cpu-host");
    CHECK(config.node.level == 3);
    CHECK(config.node.chips == chips(ChipBackend::SIM, 2));
    CHECK(config.node.subs == 2);
    check_paths_under_canopy(config);
}

TEST_CASE("every file in the examples directory parses", "[config]") {
    std::size_t count = 0;
    for (const auto& entry : std::filesystem::directory_iterator(EXAMPLES)) {
        INFO(entry.path());
        CHECK_NOTHROW(load_config(entry.path()));
        ++count;
    }
    CHECK(count >= 4);
}
