// Every rule of the "node" section, each fed a document that breaks it.

#include "config_test_util.h"

using canopy::config::testing::require_all_rejected;
using canopy::config::testing::require_rejected;
using canopy::config::testing::with_node;

namespace {

const std::string SIM0 = R"({"device": 0, "backend": "sim"})";
const std::string SIM1 = R"({"device": 1, "backend": "sim"})";

std::string nested(const std::string& body) {
    return with_node(R"({"level": 4, "nodes": [)" + body + "]}");
}

} // namespace

TEST_CASE("the document and its node must be objects, and node must be given", "[config]") {
    require_all_rejected({
        {"document is an array", "[]", "", "expected an object, got array"},
        {"document is a string", R"("node")", "", R"(expected an object, got string "node")"},
        {"node is missing", R"({"log": {}})", "/node", R"(missing required key "node")"},
        {"node is an array", R"({"node": []})", "/node", "expected an object, got array"},
        {"node is null", R"({"node": null})", "/node", "expected an object, got null"},
    });
}

TEST_CASE("node names are 1 to 64 characters of letters, digits, '_', '.' and '-'", "[config]") {
    const std::string long_name(65, 'a');
    require_all_rejected({
        {"empty", with_node(R"({"name": "", "subs": 1})"), "/node/name", "1 to 64 characters, got 0 characters"},
        {"too long", with_node(R"({"name": ")" + long_name + R"(", "subs": 1})"), "/node/name", "got 65 characters"},
        {"space", with_node(R"({"name": "host a", "subs": 1})"), "/node/name",
         R"(letters, digits, '_', '.' and '-', got "host a")"},
        {"slash", with_node(R"({"name": "a/b", "subs": 1})"), "/node/name", R"(got "a/b")"},
        {"dots alone", with_node(R"({"name": "..", "subs": 1})"), "/node/name", "not made of dots alone"},
        {"not a string", with_node(R"({"name": 5, "subs": 1})"), "/node/name", "expected a string, got integer 5"},
    });
    CHECK(canopy::config::parse_config(with_node(R"({"name": ")" + std::string(64, 'a') + R"(", "subs": 1})"))
              .node.name == std::string(64, 'a'));
}

TEST_CASE("node names must not look like worker names", "[config]") {
    require_all_rejected({
        {"chip0", with_node(R"({"name": "chip0", "subs": 1})"), "/node/name",
         R"(not a worker name (chipN, subN), got "chip0")"},
        {"sub12", with_node(R"({"name": "sub12", "subs": 1})"), "/node/name", R"(got "sub12")"},
        {"nested sub0", nested(R"({"name": "sub0", "subs": 1})"), "/node/nodes/0/name", "not a worker name"},
    });
    CHECK(canopy::config::parse_config(with_node(R"({"name": "chipper", "subs": 1})")).node.name == "chipper");
    CHECK(canopy::config::parse_config(with_node(R"({"name": "sub", "subs": 1})")).node.name == "sub");
}

TEST_CASE("node level is 3 or 4", "[config]") {
    require_all_rejected({
        {"five", with_node(R"({"level": 5, "subs": 1})"), "/node/level", "expected 3 or 4, got 5"},
        {"two", with_node(R"({"level": 2, "subs": 1})"), "/node/level", "expected 3 or 4, got 2"},
        {"string", with_node(R"({"level": "3", "subs": 1})"), "/node/level", R"(expected an integer, got string "3")"},
        {"float", with_node(R"({"level": 3.0, "subs": 1})"), "/node/level", "expected an integer, got number 3.0"},
    });
}

TEST_CASE("a level-3 node has no nested nodes", "[config]") {
    require_rejected(with_node(R"({"level": 3, "subs": 1, "nodes": [{"name": "n", "subs": 1}]})"), "/node/nodes",
                     "a level-3 node has no nested nodes, got 1");
    require_rejected(with_node(R"({"subs": 1, "nodes": [{"name": "n", "subs": 1}]})"), "/node/nodes",
                     "a level-3 node has no nested nodes");
    CHECK(canopy::config::parse_config(with_node(R"({"subs": 1, "nodes": []})")).node.nodes.empty());
}

TEST_CASE("a level-4 node has no chips and needs nested nodes", "[config]") {
    require_all_rejected({
        {"chips", with_node(R"({"level": 4, "chips": [)" + SIM0 + R"(], "nodes": [{"name": "n", "subs": 1}]})"),
         "/node/chips", "a level-4 node has no chips of its own"},
        {"empty nodes", with_node(R"({"level": 4, "subs": 1, "nodes": []})"), "/node/nodes",
         "a level-4 node needs at least one nested node, got none"},
        {"no nodes key", with_node(R"({"level": 4, "subs": 1})"), "/node/nodes",
         "a level-4 node needs at least one nested node"},
    });
}

TEST_CASE("nested nodes need a name, unique among siblings, and are level 3", "[config]") {
    require_all_rejected({
        {"no name", nested(R"({"subs": 1})"), "/node/nodes/0/name", R"(missing required key "name")"},
        {"level 4", nested(R"({"name": "n", "level": 4, "subs": 1})"), "/node/nodes/0/level",
         "expected 3 (a nested node is a level-3 node), got 4"},
        {"duplicate", nested(R"({"name": "a", "subs": 1}, {"name": "a", "subs": 2})"), "/node/nodes/1/name",
         R"(duplicate node name "a" (also at /node/nodes/0/name))"},
        {"nested nodes of its own", nested(R"({"name": "a", "subs": 1, "nodes": [{"name": "b", "subs": 1}]})"),
         "/node/nodes/0/nodes", "a level-3 node has no nested nodes"},
        {"no workers", nested(R"({"name": "a"})"), "/node/nodes/0", "a node needs at least one worker"},
        {"bad chip inside", nested(R"({"name": "a", "chips": [{"device": 0, "backend": "gpu"}]})"),
         "/node/nodes/0/chips/0/backend", R"(expected "cuda" or "sim", got "gpu")"},
        {"not an object", nested(R"("a")"), "/node/nodes/0", R"(expected an object, got string "a")"},
    });
    const auto config = canopy::config::parse_config(nested(R"({"name": "a", "level": 3, "subs": 1})"));
    REQUIRE(config.node.nodes.size() == 1);
    CHECK(config.node.nodes[0].level == 3);
}

TEST_CASE("chips are objects with an integer device 0..1023 and a backend cuda or sim", "[config]") {
    require_all_rejected({
        {"chips not an array", with_node(R"({"chips": {}})"), "/node/chips", "expected an array, got object"},
        {"chip not an object", with_node(R"({"chips": [0]})"), "/node/chips/0", "expected an object, got integer 0"},
        {"device missing", with_node(R"({"chips": [{"backend": "sim"}]})"), "/node/chips/0/device",
         R"(missing required key "device")"},
        {"backend missing", with_node(R"({"chips": [{"device": 0}]})"), "/node/chips/0/backend",
         R"(missing required key "backend")"},
        {"device 1024", with_node(R"({"chips": [{"device": 1024, "backend": "sim"}]})"), "/node/chips/0/device",
         "expected an integer from 0 to 1023, got 1024"},
        {"device -1", with_node(R"({"chips": [{"device": -1, "backend": "sim"}]})"), "/node/chips/0/device",
         "from 0 to 1023, got -1"},
        {"device huge", with_node(R"({"chips": [{"device": 18446744073709551615, "backend": "sim"}]})"),
         "/node/chips/0/device", "got 18446744073709551615"},
        {"device float", with_node(R"({"chips": [{"device": 1.5, "backend": "sim"}]})"), "/node/chips/0/device",
         "expected an integer, got number 1.5"},
        {"backend gpu", with_node(R"({"chips": [)" + SIM0 + R"(, {"device": 1, "backend": "gpu"}]})"),
         "/node/chips/1/backend", R"(/node/chips/1/backend: expected "cuda" or "sim", got "gpu")"},
        {"backend not a string", with_node(R"({"chips": [{"device": 0, "backend": true}]})"), "/node/chips/0/backend",
         R"(expected "cuda" or "sim", got boolean true)"},
    });
    const auto config = canopy::config::parse_config(with_node(R"({"chips": [{"device": 1023, "backend": "cuda"}]})"));
    CHECK(config.node.chips == std::vector<canopy::config::ChipConfig>{{1023, canopy::config::ChipBackend::CUDA}});
}

TEST_CASE("two chips of one backend on one device in one node are refused", "[config]") {
    require_rejected(with_node(R"({"chips": [{"device": 0, "backend": "cuda"}, )" + SIM1 +
                               R"(, {"device": 0, "backend": "cuda"}]})"),
                     "/node/chips/2", "duplicate chip: cuda device 0 is also /node/chips/0");
    // The same device under different backends, and the same chip in two nested nodes, are allowed.
    const auto config =
        canopy::config::parse_config(with_node(R"({"chips": [{"device": 0, "backend": "cuda"}, )" + SIM0 + "]}"));
    CHECK(config.node.chips.size() == 2);
    CHECK(canopy::config::parse_config(
              nested(R"({"name": "a", "chips": [)" + SIM0 + R"(]}, {"name": "b", "chips": [)" + SIM0 + "]}"))
              .node.nodes.size() == 2);
}

TEST_CASE("subs is an integer 0..64", "[config]") {
    require_all_rejected({
        {"65", with_node(R"({"subs": 65})"), "/node/subs", "expected an integer from 0 to 64, got 65"},
        {"-1", with_node(R"({"subs": -1})"), "/node/subs", "from 0 to 64, got -1"},
        {"string", with_node(R"({"subs": "2"})"), "/node/subs", R"(expected an integer, got string "2")"},
    });
    CHECK(canopy::config::parse_config(with_node(R"({"subs": 64})")).node.subs == 64);
}

TEST_CASE("a node needs at least one worker", "[config]") {
    require_all_rejected({
        {"empty node", with_node("{}"), "/node", "a node needs at least one worker (a chip, a sub or a nested node)"},
        {"zero subs, no chips", with_node(R"({"subs": 0, "chips": []})"), "/node", "got none"},
    });
}

TEST_CASE("is_node_name takes exactly the node names the config parser takes", "[config]") {
    for (const std::string& name :
         {std::string("hb"), std::string(64, 'a'), std::string("a.b_c-D9"), std::string(".x"), std::string("chip"),
          std::string("subx"), std::string("chip0a"), std::string(), std::string(65, 'a'), std::string("host a"),
          std::string("a/b"), std::string(".."), std::string("chip0"), std::string("sub12"), std::string("caf\xc3\xa9"),
          std::string("a\nb")}) {
        INFO(name);
        bool parsed = true;
        try {
            canopy::config::parse_config(with_node(nlohmann::json({{"name", name}, {"subs", 1}}).dump()));
        } catch (const canopy::config::ConfigError&) {
            parsed = false;
        }
        CHECK(canopy::config::is_node_name(name) == parsed);
    }
}
