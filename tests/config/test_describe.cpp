// describe lists the worker tree and every section; worker_paths lists workers in tree order.

#include "config_test_util.h"

using namespace canopy::config;
using canopy::config::testing::EXAMPLES;

TEST_CASE("worker_paths lists chips then subs of a level-3 node", "[config]") {
    const Config config = load_config(EXAMPLES / "cpu.json");
    CHECK(worker_paths(config.node) == std::vector<std::string>{"/chip0", "/chip1", "/sub0", "/sub1"});
}

TEST_CASE("worker_paths lists subs, then each nested node and its workers, of a level-4 node", "[config]") {
    const Config config = load_config(EXAMPLES / "l4-two-nodes.json");
    CHECK(worker_paths(config.node) == std::vector<std::string>{"/sub0", "/node0", "/node0/chip0", "/node0/chip1",
                                                                "/node0/sub0", "/node0/sub1", "/node1", "/node1/chip0",
                                                                "/node1/chip1", "/node1/sub0", "/node1/sub1"});
}

TEST_CASE("describe mentions every worker path with what runs there", "[config]") {
    for (const char* name : {"one-gpu.json", "eight-gpus.json", "l4-two-nodes.json", "cpu.json"}) {
        INFO(name);
        const Config config = load_config(EXAMPLES / name);
        const std::string text = describe(config);
        INFO(text);
        CHECK_THAT(text, Catch::Contains("\n  / (node \"" + config.node.name + "\", level " +
                                         std::to_string(config.node.level) + ")\n"));
        for (const std::string& path : worker_paths(config.node)) {
            CHECK_THAT(text, Catch::Contains("\n  " + path + " ("));
        }
    }
    const std::string l4 = describe(load_config(EXAMPLES / "l4-two-nodes.json"));
    CHECK_THAT(l4, Catch::Contains("\n  /node1/chip1 (sim device 1)\n"));
    CHECK_THAT(l4, Catch::Contains("\n  /node0 (node \"node0\", level 3)\n"));
    CHECK_THAT(l4, Catch::Contains("\n  /sub0 (sub)\n"));
    CHECK_THAT(describe(load_config(EXAMPLES / "one-gpu.json")), Catch::Contains("\n  /chip0 (cuda device 0)\n"));
}

TEST_CASE("describe shows every section after the worker tree", "[config]") {
    const std::string text = describe(load_config(EXAMPLES / "eight-gpus.json"));
    INFO(text);
    CHECK_THAT(text, Catch::Contains("control socket: /run/canopy/canopy.sock"));
    CHECK_THAT(text, Catch::Contains("allowed uids besides the daemon's own: 1000, 1001"));
    CHECK_THAT(text, Catch::Contains("allowed gids: none"));
    CHECK_THAT(text, Catch::Contains("max frame: 4194304 bytes"));
    CHECK_THAT(text, Catch::Contains("state dir: /var/lib/canopy\n"));
    CHECK_THAT(text, Catch::Contains("log: level info, format journal"));
    CHECK_THAT(text, Catch::Contains("weights: fork_cow, file /srv/models/weights.bin"));
    CHECK_THAT(text, Catch::Contains("scratch: fork_shm, 268435456 bytes"));
    CHECK_THAT(text, Catch::Contains("supervision: restart budget 10, backoff 100 ms to 10000 ms, drain timeout "
                                     "30000 ms, task timeout none"));
    CHECK_THAT(text, Catch::Contains("metrics: listen on 127.0.0.1:9464"));
    CHECK_THAT(text, Catch::Contains("testing: fault kernels off"));
    CHECK(text.find("workers:") < text.find("control socket:"));
    const std::string cpu = describe(load_config(EXAMPLES / "cpu.json"));
    CHECK_THAT(cpu, Catch::Contains("metrics: off"));
    CHECK_THAT(cpu, Catch::Contains("preload: none"));
}
