// Every file under config/examples parses and has the shape its name promises, and every JSON document
// docs/config.md shows parses.

#include "config_test_util.h"

#include <algorithm>
#include <fstream>
#include <sstream>

using canopy::config::ChipBackend;
using canopy::config::ChipConfig;
using canopy::config::Config;
using canopy::config::load_config;
using canopy::config::testing::EXAMPLES;

namespace {

std::vector<ChipConfig> chips(ChipBackend backend, std::uint32_t count) {
    std::vector<ChipConfig> list;
    for (std::uint32_t device = 0; device < count; ++device) {
        list.push_back({device, backend});
    }
    return list;
}

std::string read_text(const std::filesystem::path& file) {
    std::ifstream in(file);
    REQUIRE(in.good());
    std::ostringstream text;
    text << in.rdbuf();
    return text.str();
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
    CHECK(count >= 6);
}

TEST_CASE("the l4-remote example has a local nested node ha and a remote node hb at 10.0.0.2:7471", "[config]") {
    const Config config = load_config(EXAMPLES / "l4-remote.json");
    CHECK(config.node.level == 4);
    CHECK(config.node.subs == 1);
    REQUIRE(config.node.nodes.size() == 2);
    CHECK(config.node.nodes[0].name == "ha");
    CHECK(config.node.nodes[0].chips == chips(ChipBackend::CUDA, 2));
    CHECK_FALSE(config.node.nodes[0].remote.has_value());
    CHECK(config.node.nodes[1].name == "hb");
    REQUIRE(config.node.nodes[1].remote.has_value());
    CHECK(canopy::config::to_string(config.node.nodes[1].remote->address) == "10.0.0.2:7471");
    CHECK(config.node.nodes[1].remote->tls.peer_name == "hb");
    CHECK_FALSE(config.serve.has_value());
    check_paths_under_canopy(config);
}

TEST_CASE("the l3-serve example is host hb serving its two cuda chips to the L4 named rack", "[config]") {
    const Config config = load_config(EXAMPLES / "l3-serve.json");
    CHECK(config.node.name == "hb");
    CHECK(config.node.level == 3);
    CHECK(config.node.chips == chips(ChipBackend::CUDA, 2));
    REQUIRE(config.serve.has_value());
    CHECK(canopy::config::to_string(config.serve->listen) == "0.0.0.0:7471");
    CHECK(config.serve->tls.peer_name == "rack");
    CHECK_FALSE(config.serve->tls.insecure);
    check_paths_under_canopy(config);
}

TEST_CASE("every json block of docs/config.md parses, and the remote pair there is the pair of example files",
          "[config]") {
    const std::string text = read_text(std::filesystem::path(CANOPY_DOCS_DIR) / "config.md");
    std::vector<Config> documents;
    const std::string open = "```json\n";
    for (std::size_t at = text.find(open); at != std::string::npos; at = text.find(open, at)) {
        at += open.size();
        const std::size_t end = text.find("```", at);
        REQUIRE(end != std::string::npos);
        INFO(text.substr(at, end - at));
        REQUIRE_NOTHROW(documents.push_back(canopy::config::parse_config(text.substr(at, end - at))));
        at = end + 3;
    }
    CHECK(documents.size() >= 3);
    for (const char* name : {"l4-remote.json", "l3-serve.json"}) {
        INFO(name);
        CHECK(std::count(documents.begin(), documents.end(), load_config(EXAMPLES / name)) == 1);
    }
}
