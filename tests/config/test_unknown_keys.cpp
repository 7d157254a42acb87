// Unknown keys are refused at every level of the document, and so is a key given twice.

#include "config_test_util.h"

using canopy::config::testing::require_all_rejected;
using canopy::config::testing::require_rejected;
using canopy::config::testing::with_node;
using canopy::config::testing::with_sections;

TEST_CASE("an unknown key is refused at every level, naming the key", "[config]") {
    const std::string sim0 = R"({"device": 0, "backend": "sim"})";
    require_all_rejected({
        {"top", with_sections(R"("colour": "red")"), "/colour", R"(/colour: unknown key "colour")"},
        {"node", with_node(R"({"subs": 1, "colour": "red"})"), "/node/colour", R"(/node/colour: unknown key "colour")"},
        {"chip", with_node(R"({"chips": [)" + sim0 + R"(, {"device": 1, "backend": "sim", "memory": 4}]})"),
         "/node/chips/1/memory", R"(unknown key "memory")"},
        {"nested node", with_node(R"({"level": 4, "nodes": [{"name": "a", "subs": 1, "host": "x"}]})"),
         "/node/nodes/0/host", R"(unknown key "host")"},
        {"chip of a nested node",
         with_node(R"({"level": 4, "nodes": [{"name": "a", "chips": [{"device": 0, "backend": "sim", "x": 1}]}]})"),
         "/node/nodes/0/chips/0/x", R"(unknown key "x")"},
        {"control", with_sections(R"("control": {"port": 1})"), "/control/port", R"(unknown key "port")"},
        {"log", with_sections(R"("log": {"file": "/x"})"), "/log/file", R"(unknown key "file")"},
        {"preload", with_sections(R"("preload": [{"name": "w", "path": "/w", "backend": "fork_cow", "mode": "ro"}])"),
         "/preload/0/mode", R"(unknown key "mode")"},
        {"supervision", with_sections(R"("supervision": {"retries": 3})"), "/supervision/retries",
         R"(unknown key "retries")"},
        {"metrics", with_sections(R"("metrics": {"port": 9464})"), "/metrics/port", R"(unknown key "port")"},
        {"testing", with_sections(R"("testing": {"faults": true})"), "/testing/faults", R"(unknown key "faults")"},
    });
}

TEST_CASE("an unknown key close to a known one gets a hint", "[config]") {
    require_all_rejected({
        {"chip for chips", with_node(R"({"chip": [], "subs": 1})"), "/node/chip",
         R"(unknown key "chip" (did you mean "chips"?))"},
        {"supervison", with_sections(R"("supervison": {})"), "/supervison", R"((did you mean "supervision"?))"},
        {"letter case", with_node(R"({"Subs": 1})"), "/node/Subs", R"((did you mean "subs"?))"},
        {"faultkernels", with_sections(R"("testing": {"fault_kernel": true})"), "/testing/fault_kernel",
         R"((did you mean "fault_kernels"?))"},
    });
    try {
        (void)canopy::config::parse_config(with_node(R"({"colour": 1, "subs": 1})"));
        FAIL("accepted an unknown key");
    } catch (const canopy::config::ConfigError& error) {
        CHECK_THAT(error.what(), !Catch::Contains("did you mean"));
    }
}

TEST_CASE("a pointer escapes '~' and '/' in keys per RFC 6901", "[config]") {
    require_rejected(with_node(R"({"subs": 1, "a/b~c": 1})"), "/node/a~1b~0c", R"(unknown key "a/b~c")");
    require_rejected(with_sections(R"("~1": 1)"), "/~01", R"(unknown key "~1")");
}

TEST_CASE("a key given twice in one object is refused at its pointer", "[config]") {
    require_all_rejected({
        {"top", R"({"node": {"subs": 1}, "node": {"subs": 2}})", "/node", R"(duplicate key "node")"},
        {"node", with_node(R"({"subs": 1, "subs": 2})"), "/node/subs", R"(/node/subs: duplicate key "subs")"},
        {"inside an array",
         with_node(R"({"chips": [{"device": 0, "backend": "sim"}, {"device": 1, "device": 2, "backend": "sim"}]})"),
         "/node/chips/1/device", R"(duplicate key "device")"},
        {"after nested arrays",
         with_sections(R"("control": {"allow_uids": [1, [2, 3], {"a": [4]}], "allow_gids": [], "allow_gids": []})"),
         "/control/allow_gids", R"(duplicate key "allow_gids")"},
        {"deep",
         with_node(R"({"level": 4, "nodes": [{"name": "a", "subs": 1}, {"name": "b", "subs": 1, "name": "c"}]})"),
         "/node/nodes/1/name", R"(duplicate key "name")"},
    });
}
