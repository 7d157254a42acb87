// parse_config reads every key of the schema, and fills every omitted key with its default.

#include "config_test_util.h"

using namespace canopy::config;
using canopy::config::testing::with_node;

namespace {

const std::string FULL = R"({
  "node": {"name": "host-a", "level": 3,
           "chips": [{"device": 0, "backend": "cuda"}, {"device": 1, "backend": "sim"}],
           "subs": 2, "nodes": []},
  "control": {"socket": "/run/canopy/a.sock", "allow_uids": [0], "allow_gids": [10, 20], "admin_uids": [1000],
              "admin_gids": [27], "max_frame_bytes": 2048, "task_history": 50},
  "state_dir": "/var/lib/canopy-a",
  "log": {"level": "warn", "format": "journal"},
  "preload": [{"name": "weights", "path": "/srv/w.bin", "backend": "fork_cow"},
              {"name": "scratch", "bytes": 1048576, "backend": "fork_shm"}],
  "supervision": {"restart_budget": 7, "backoff_initial_ms": 20, "backoff_max_ms": 400,
                  "drain_timeout_ms": 900, "task_timeout_ms": 60000},
  "metrics": {"listen": "127.0.0.1:9464"},
  "testing": {"fault_kernels": true}
})";

} // namespace

TEST_CASE("parse_config reads every key of the schema", "[config]") {
    const Config config = parse_config(FULL);
    CHECK(config.node.name == "host-a");
    CHECK(config.node.level == 3);
    CHECK(config.node.chips == std::vector<ChipConfig>{{0, ChipBackend::CUDA}, {1, ChipBackend::SIM}});
    CHECK(config.node.subs == 2);
    CHECK(config.control.socket == "/run/canopy/a.sock");
    CHECK(config.control.allow_uids == std::vector<std::uint32_t>{0});
    CHECK(config.control.allow_gids == std::vector<std::uint32_t>{10, 20});
    CHECK(config.control.max_frame_bytes == 2048);
    CHECK(config.control.admin_uids == std::vector<std::uint32_t>{1000});
    CHECK(config.control.admin_gids == std::vector<std::uint32_t>{27});
    CHECK(config.control.task_history == 50);
    CHECK(config.state_dir == "/var/lib/canopy-a");
    CHECK(config.log.level == LogLevel::WARN);
    CHECK(config.log.format == LogFormat::JOURNAL);
    REQUIRE(config.preload.size() == 2);
    CHECK(config.preload[0] ==
          PreloadConfig{"weights", std::filesystem::path("/srv/w.bin"), 0, PreloadBackend::FORK_COW});
    CHECK(config.preload[1] == PreloadConfig{"scratch", std::nullopt, 1048576, PreloadBackend::FORK_SHM});
    CHECK(config.supervision.restart_budget == 7);
    CHECK(config.supervision.backoff_initial == std::chrono::milliseconds(20));
    CHECK(config.supervision.backoff_max == std::chrono::milliseconds(400));
    CHECK(config.supervision.drain_timeout == std::chrono::milliseconds(900));
    CHECK(config.supervision.task_timeout == std::chrono::milliseconds(60000));
    CHECK(config.metrics.listen == ListenAddress{"127.0.0.1", 9464});
    CHECK(config.testing.fault_kernels);
}

TEST_CASE("parse_config gives every omitted key its default", "[config]") {
    const Config config = parse_config(with_node(R"({"subs": 1})"));
    CHECK(config.node.name == "local");
    CHECK(config.node.level == 3);
    CHECK(config.node.chips.empty());
    CHECK(config.control.socket == "/run/canopy/canopy.sock");
    CHECK(config.control.allow_uids.empty());
    CHECK(config.control.allow_gids.empty());
    CHECK(config.control.max_frame_bytes == 1048576);
    CHECK(config.state_dir == "/var/lib/canopy");
    CHECK(config.log.level == LogLevel::INFO);
    CHECK(config.log.format == LogFormat::AUTO);
    CHECK(config.preload.empty());
    CHECK(config.supervision.restart_budget == 5);
    CHECK(config.supervision.backoff_initial == std::chrono::milliseconds(50));
    CHECK(config.supervision.backoff_max == std::chrono::milliseconds(5000));
    CHECK(config.supervision.drain_timeout == std::chrono::milliseconds(10000));
    CHECK(config.supervision.task_timeout == std::chrono::milliseconds(0));
    CHECK_FALSE(config.metrics.listen.has_value());
    CHECK_FALSE(config.testing.fault_kernels);
}

TEST_CASE("parse_config leaves subs at 0 when node omits it", "[config]") {
    const Config config = parse_config(with_node(R"({"chips": [{"device": 3, "backend": "cuda"}]})"));
    CHECK(config.node.subs == 0);
    CHECK(config.node.chips == std::vector<ChipConfig>{{3, ChipBackend::CUDA}});
}

TEST_CASE("parse_config reads a level-4 node with nested level-3 nodes", "[config]") {
    const Config config = parse_config(with_node(R"({"name": "top", "level": 4, "subs": 1, "nodes": [
        {"name": "a", "chips": [{"device": 0, "backend": "cuda"}]},
        {"name": "b", "level": 3, "subs": 2}]})"));
    CHECK(config.node.level == 4);
    CHECK(config.node.subs == 1);
    REQUIRE(config.node.nodes.size() == 2);
    CHECK(config.node.nodes[0] == NodeConfig{"a", 3, {{0, ChipBackend::CUDA}}, 0, {}, std::nullopt});
    CHECK(config.node.nodes[1] == NodeConfig{"b", 3, {}, 2, {}, std::nullopt});
}

TEST_CASE("every log level and format word is read", "[config]") {
    const std::vector<std::pair<std::string, LogLevel>> levels = {
        {"trace", LogLevel::TRACE}, {"debug", LogLevel::DEBUG}, {"info", LogLevel::INFO},
        {"warn", LogLevel::WARN},   {"error", LogLevel::ERROR}, {"critical", LogLevel::CRITICAL},
        {"off", LogLevel::OFF}};
    for (const auto& [word, level] : levels) {
        INFO(word);
        CHECK(parse_config(R"({"node": {"subs": 1}, "log": {"level": ")" + word + R"("}})").log.level == level);
        CHECK(to_string(level) == word);
    }
    const std::vector<std::pair<std::string, LogFormat>> formats = {
        {"auto", LogFormat::AUTO}, {"text", LogFormat::TEXT}, {"journal", LogFormat::JOURNAL}};
    for (const auto& [word, format] : formats) {
        INFO(word);
        CHECK(parse_config(R"({"node": {"subs": 1}, "log": {"format": ")" + word + R"("}})").log.format == format);
        CHECK(to_string(format) == word);
    }
}
