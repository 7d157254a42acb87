// The model-based soak (tests/service/soak.h) through an L4 whose buffers and tasks are on its own host and on a
// remote node's: tasks routed over the link, transfers of a remote host's bytes through the L4, copies across
// hosts both ways (staged where a side is device memory), and releases of remote buffers with tasks still queued;
// and the same with a cuda chip on the remote host.

#include "remote_fixture.h"
#include "tests/sanitizers.h"
#include "tests/service/soak.h"
#include "tests/skip.h"

#include <catch2/catch.hpp>
#include <filesystem>

using namespace canopy::e2e;

TEST_CASE("soak: clients' random requests through an L4 over its own host and a remote host keep every model",
          "[remote][soak]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure", {{"log", {{"level", "info"}}}}));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}, {{"log", {{"level", "info"}}}}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    REQUIRE(eventually_running(rack, "/hb/chip0"));
    soak(rack, {{{"sub0", "", ""}, {"hb/chip0", "sim", "hb"}, {"hb/sub0", "", "hb"}}, {"", "hb"}},
         canopy::testing::property_cases(600));
}

TEST_CASE("soak: the same with every long wait spinning and the gRPC completion queues of both hosts polling "
          "(CANOPY_SPIN=on)",
          "[remote][soak]") {
    const std::uint16_t port = free_tcp_port();
    const std::map<std::string, std::string> spin = {{"CANOPY_SPIN", "on"}};
    Daemon hb(l3_config("hb", loopback(port), "insecure", {{"log", {{"level", "info"}}}}), spin);
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}, {{"log", {{"level", "info"}}}}), spin);
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    REQUIRE(eventually_running(rack, "/hb/chip0"));
    CHECK(hb.log().find("spinning waits: on (CANOPY_SPIN=on)") != std::string::npos);
    CHECK(rack.log().find("spinning waits: on (CANOPY_SPIN=on)") != std::string::npos);
    soak(rack, {{{"sub0", "", ""}, {"hb/chip0", "sim", "hb"}, {"hb/sub0", "", "hb"}}, {"", "hb"}},
         canopy::testing::property_cases(600));
}

TEST_CASE("soak: the same with a cuda chip beside a sim chip on the remote host, its cuda_vmm buffers staged across "
          "hosts",
          "[remote][soak][gpu]") {
    if (!std::filesystem::exists("/dev/nvidia0")) {
        CANOPY_SKIP("needs a GPU");
    }
    const std::uint16_t port = free_tcp_port();
    nlohmann::json hb_config = l3_config("hb", loopback(port), "insecure", {{"log", {{"level", "info"}}}});
    hb_config["node"]["chips"] =
        nlohmann::json::array({{{"device", 0}, {"backend", "cuda"}}, {{"device", 1}, {"backend", "sim"}}});
    Daemon hb(hb_config);
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}, {{"log", {{"level", "info"}}}}));
    REQUIRE(eventually_running(rack, "/hb/chip0"));
    REQUIRE(eventually_running(rack, "/hb/chip1"));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    soak(rack,
         {{{"sub0", "", ""}, {"hb/chip0", "cuda", "hb"}, {"hb/chip1", "sim", "hb"}, {"hb/sub0", "", "hb"}}, {"", "hb"}},
         canopy::testing::property_cases(600));
}
