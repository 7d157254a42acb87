// to_json writes a document that parse_config reads back into an equal Config.

#include "config/to_json.h"
#include "config_test_util.h"

using namespace canopy::config;
using namespace canopy::config::testing;

TEST_CASE("every example survives a round trip through to_json", "[config]") {
    for (const char* name : {"one-gpu.json", "eight-gpus.json", "l4-two-nodes.json", "cpu.json"}) {
        INFO(name);
        check_round_trip(load_config(EXAMPLES / name));
    }
}

TEST_CASE("a config using every optional field survives a round trip through to_json", "[config]") {
    const Config config = parse_config(R"({
      "node": {"name": "n.1", "level": 4, "subs": 3,
               "nodes": [{"name": "x", "chips": [{"device": 1023, "backend": "cuda"}, {"device": 1023, "backend": "sim"}]},
                         {"name": "y", "subs": 64}]},
      "control": {"socket": "/s", "allow_uids": [4294967295, 0], "allow_gids": [1], "max_frame_bytes": 67108864},
      "state_dir": "/state",
      "log": {"level": "off", "format": "text"},
      "preload": [{"name": "cow", "path": "/cow", "backend": "fork_cow"},
                  {"name": "shm", "bytes": 1099511627776, "path": "/init", "backend": "fork_shm"},
                  {"name": "bare", "bytes": 1, "backend": "fork_shm"}],
      "supervision": {"restart_budget": 0, "backoff_initial_ms": 1, "backoff_max_ms": 2147483647,
                      "drain_timeout_ms": 0, "task_timeout_ms": 2147483647},
      "metrics": {"listen": "[::1]:1"},
      "testing": {"fault_kernels": true}
    })");
    check_round_trip(config);
    CHECK(to_json(config)["metrics"]["listen"] == "[::1]:1");
}

TEST_CASE("to_json writes a changed field so that the round trip sees the change", "[config]") {
    Config config = load_config(EXAMPLES / "cpu.json");
    Config changed = config;
    changed.supervision.drain_timeout = std::chrono::milliseconds(1234);
    changed.node.chips[1].backend = ChipBackend::CUDA;
    const Config reread = parse_config(to_json(changed).dump());
    CHECK(reread == changed);
    CHECK_FALSE(reread == config);
}
