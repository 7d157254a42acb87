// Buffers on a remote node's host: made there for the L4's session, used by tasks on that host alone, stale once
// the session ends, and released by the node when it does.
#include "tests/remote/remote_fixture.h"

#include <catch2/catch.hpp>
#include <csignal>
#include <cstring>
#include <fstream>
#include <iterator>
#include <thread>

using namespace canopy::e2e;
using nlohmann::json;

namespace {

// The floats of a file the node's own CLI read out of a buffer.
std::vector<float> floats_of(const std::filesystem::path& file) {
    std::ifstream in(file, std::ios::binary);
    const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::vector<float> out(bytes.size() / sizeof(float));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    return out;
}

// Polls until one line of the daemon's log holds every one of `parts`; false after 10 s.
bool eventually_logged(const Daemon& d, const std::vector<std::string>& parts) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!has_log_line(d, parts)) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
}

} // namespace

TEST_CASE("a buffer created on a remote node's host is used by tasks there and refused everywhere else", "[remote]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));

    const json created = rack.cli_json({"buffer", "create", "--bytes", "4096", "--on", "hb"});
    const std::string id = created.at("id");
    CHECK(created.at("backend") == "posix_shm");
    CHECK(created.at("nbytes") == 4096);
    CHECK(created.at("creator") == "/hb");
    // The node holds it under the same identity; the L4 lists it.
    CHECK(hb.cli_json({"buffer", "show", id}).at("nbytes") == 4096);
    bool listed = false;
    const json list = rack.cli_json({"buffer", "list"});
    INFO(list.dump());
    for (const json& b : list.at("buffers")) {
        listed = listed || b.at("id") == id;
    }
    CHECK(listed);

    // Tasks on the host's workers reach it: fill on the sub, scale on the chip; the bytes are on the host.
    CHECK(rack.cli_json({"submit", "fill", "--on", "hb/sub0", "--out", id + ":float32:1024", "--scalar", "float32:2.5",
                         "--wait"})
              .at("state") == "completed");
    CHECK(rack.cli_json({"submit", "scale", "--on", "hb/chip0", "--inout", id + ":float32:1024", "--scalar",
                         "float32:2", "--wait"})
              .at("state") == "completed");
    const auto file = hb.dir() / "out.bin";
    REQUIRE(hb.cli({"buffer", "read", id, "--to", file.string()}).rc == 0);
    const std::vector<float> values = floats_of(file);
    REQUIRE(values.size() == 1024);
    CHECK(std::count(values.begin(), values.end(), 5.0f) == 1024);

    // The L4's own workers cannot reach it, nor can the L4 read its bytes or hand out its fd.
    Output o = rack.cli(
        {"submit", "fill", "--on", "sub0", "--out", id + ":float32:1024", "--scalar", "float32:1", "--wait", "--json"});
    CHECK(o.rc != 0);
    CHECK(error_code_of(o.json()) == "UNREACHABLE_BUFFER");
    CHECK_THAT(error_message_of(o.json()),
               Catch::Contains("is on the host of remote node /hb, which /sub0 cannot reach"));
    o = rack.cli({"buffer", "read", id, "--to", (rack.dir() / "x.bin").string(), "--json"});
    CHECK(o.rc != 0);
    CHECK(error_code_of(o.json()) == "UNREACHABLE_BUFFER");
    CHECK_THAT(error_message_of(o.json()), Catch::Contains("is on the host of remote node /hb"));
    // Device memory of the host's chips is not offered through the L4.
    o = rack.cli({"buffer", "create", "--bytes", "4096", "--on", "hb/chip0", "--backend", "vmm", "--json"});
    CHECK(o.rc != 0);
    CHECK(error_code_of(o.json()) == "BAD_REQUEST");
    CHECK_THAT(error_message_of(o.json()), Catch::Contains("a buffer on remote node /hb is a posix_shm buffer"));

    // Released through the L4, it is gone on the host too.
    REQUIRE(rack.cli({"buffer", "release", id}).rc == 0);
    o = hb.cli({"buffer", "show", id, "--json"});
    CHECK(o.rc != 0);
    CHECK(error_code_of(o.json()) == "STALE_BUFFER");
    o = rack.cli({"submit", "fill", "--on", "hb/sub0", "--out", id + ":float32:1024", "--scalar", "float32:1", "--wait",
                  "--json"});
    CHECK(o.rc != 0);
    CHECK(error_code_of(o.json()) == "STALE_BUFFER");
    CHECK_THAT(error_message_of(o.json()), Catch::Contains("was released"));
}

TEST_CASE("a remote host's buffers go stale with its session, and the node releases them when the session ends",
          "[remote]") {
    const std::uint16_t port = free_tcp_port();
    auto hb = std::make_unique<Daemon>(l3_config("hb", loopback(port), "insecure"));
    {
        // An L4 that goes away: the node releases what its session made and serves on.
        Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
        REQUIRE(eventually_running(rack, "/hb/sub0"));
        const std::string id = rack.cli_json({"buffer", "create", "--bytes", "4096", "--on", "hb"}).at("id");
        CHECK(hb->cli_json({"buffer", "show", id}).at("nbytes") == 4096);
        REQUIRE(::kill(rack.pid(), SIGKILL) == 0);
        REQUIRE(rack.wait_exit(std::chrono::seconds(10)).has_value());
        CHECK(eventually_logged(*hb, {"L4 session 1 ended: released its 1 buffers"}));
        const Output o = hb->cli({"buffer", "show", id, "--json"});
        CHECK(o.rc != 0);
        CHECK(error_code_of(o.json()) == "STALE_BUFFER");
    }

    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure", 1000)}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    const std::string id = rack.cli_json({"buffer", "create", "--bytes", "4096", "--on", "hb"}).at("id");
    // The host dies: its buffer is stale at the L4, naming the host and why, and stays so when a new canopyd
    // takes the host's place.
    REQUIRE(::kill(hb->pid(), SIGKILL) == 0);
    REQUIRE(eventually_logged(rack, {"/hb: 1 buffers on its host are stale"}));
    const auto stale = [&] {
        const Output o = rack.cli({"submit", "fill", "--on", "hb/sub0", "--out", id + ":float32:1024", "--scalar",
                                   "float32:1", "--wait", "--json"});
        CHECK(o.rc != 0);
        CHECK(error_code_of(o.json()) == "STALE_BUFFER");
        CHECK_THAT(error_message_of(o.json()),
                   Catch::Contains("lived on remote node /hb, whose session ended: host hb at 127.0.0.1:" +
                                   std::to_string(port) + " lost"));
    };
    stale();
    hb.reset();
    Daemon hb_again(l3_config("hb", loopback(port), "insecure"));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    stale();
    const Output released = rack.cli({"buffer", "release", id, "--json"});
    CHECK(released.rc != 0);
    CHECK(error_code_of(released.json()) == "STALE_BUFFER");
    // A buffer of the new incarnation works as any.
    const std::string fresh = rack.cli_json({"buffer", "create", "--bytes", "64", "--on", "hb"}).at("id");
    CHECK(rack.cli_json({"submit", "fill", "--on", "hb/sub0", "--out", fresh + ":float32:16", "--scalar", "float32:1",
                         "--wait"})
              .at("state") == "completed");
}
