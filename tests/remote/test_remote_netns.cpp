// Remote nodes between test hosts: each host a network namespace with a private /dev/shm, joined to the L4's
// host by its own veth pair (tests/remote/hosts.h). Skipped where namespaces cannot be made (not root).
#include "daemon/remote_call.h"
#include "tests/remote/hosts.h"
#include "tests/remote/remote_fixture.h"
#include "tests/skip.h"

#include <catch2/catch.hpp>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

using namespace canopy::e2e;
using nlohmann::json;

namespace {

constexpr std::uint16_t PORT = 7471;

// The testing section that lets plain TCP cross between namespaces.
const json INSECURE_PEERS = {{"testing", {{"fault_kernels", true}, {"insecure_peers", true}}}};

// The config of remote host `host`: a level-3 node serving its L4 on PORT of every address of its namespace.
json host_config(const std::string& host) {
    return l3_config(host, "0.0.0.0:" + std::to_string(PORT), "insecure", INSECURE_PEERS);
}

std::string at(const TestNetwork& net, const std::string& host) {
    return net.address(host) + ":" + std::to_string(PORT);
}

// The names of the files in a daemon's view of /dev/shm.
std::set<std::string> shm_names(pid_t pid) {
    std::set<std::string> names;
    for (const auto& e : std::filesystem::directory_iterator("/proc/" + std::to_string(pid) + "/root/dev/shm")) {
        names.insert(e.path().filename().string());
    }
    return names;
}

// The L4's host "rack" and two remote hosts, hb and hc, each a level-3 node with one sim chip and one sub, in
// namespaces of their own.
struct ThreeHosts {
    TestNetwork net{{"rack", "hb", "hc"}};
    Daemon hb{host_config("hb"), {}, net.enter("hb")};
    Daemon hc{host_config("hc"), {}, net.enter("hc")};
    Daemon rack{l4_config({remote_node("hb", at(net, "hb"), "insecure"), remote_node("hc", at(net, "hc"), "insecure")},
                          INSECURE_PEERS),
                {},
                net.enter("rack")};
};

} // namespace

TEST_CASE("an L4 runs tasks on two remote hosts, each in its own network namespace with its own /dev/shm",
          "[remote][netns]") {
    if (const std::string why = TestNetwork::unavailable(); !why.empty()) {
        CANOPY_SKIP(why);
    }
    ThreeHosts hosts;
    TestNetwork& net = hosts.net;
    Daemon& hb = hosts.hb;
    Daemon& hc = hosts.hc;
    Daemon& rack = hosts.rack;
    REQUIRE(eventually_running(rack, "/hb/chip0"));
    REQUIRE(eventually_running(rack, "/hc/sub0"));
    for (const std::string on : {"hb/chip0", "hb/sub0", "hc/chip0", "hc/sub0", "sub0"}) {
        const json done = rack.cli_json({"submit", "sleep_ms", "--on", on, "--scalar", "int64:1", "--wait"});
        INFO(on);
        CHECK(done.at("state") == "completed");
    }
    CHECK(has_log_line(hb, {"L4 rack attached from ipv4:" + net.hub_address("hb")}));
    CHECK(has_log_line(hc, {"L4 rack attached from ipv4:" + net.hub_address("hc")}));
    // A buffer of the L4's host is in its /dev/shm alone.
    rack.create_buffer(4096);
    const auto rack_shm = shm_names(rack.pid());
    REQUIRE_FALSE(rack_shm.empty());
    for (const auto& name : shm_names(hb.pid())) {
        CHECK(rack_shm.count(name) == 0);
    }
    CHECK(shm_names(hb.pid()) != rack_shm);
}

TEST_CASE("a partition loses the host within lost_after, the other host and the L4 serve on, and the host is attached "
          "again when the link returns",
          "[remote][netns]") {
    if (const std::string why = TestNetwork::unavailable(); !why.empty()) {
        CANOPY_SKIP(why);
    }
    TestNetwork net({"rack", "hb", "hc"});
    Daemon hb(host_config("hb"), {}, net.enter("hb"));
    Daemon hc(host_config("hc"), {}, net.enter("hc"));
    // Under the sanitizers a live host's heartbeat can come more than 600 ms late (see DEFAULT_LOST_AFTER_MS).
    const std::int64_t lost_after_ms = canopy::testing::SANITIZED ? 2000 : 600;
    Daemon rack(l4_config({remote_node("hb", at(net, "hb"), "insecure", lost_after_ms),
                           remote_node("hc", at(net, "hc"), "insecure", lost_after_ms)},
                          INSECURE_PEERS),
                {}, net.enter("rack"));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    REQUIRE(eventually_running(rack, "/hc/sub0"));
    const json slow = rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:3000"});
    REQUIRE(eventually_started(rack, slow.at("id").get<std::uint64_t>()));

    net.set_link("hb", false);
    const auto cut_at = std::chrono::steady_clock::now();
    const json failed = rack.cli_json({"wait", slow.at("id").dump()});
    const auto took = std::chrono::steady_clock::now() - cut_at;
    CHECK(failed.at("error").at("code") == "WORKER_DIED");
    CHECK_THAT(failed.at("error").at("message").get<std::string>(),
               Catch::Contains("host hb at " + at(net, "hb") + " lost"));
    CHECK(took < std::chrono::milliseconds(lost_after_ms + 2400));
    // hc and the L4's own sub serve throughout.
    for (const std::string on : {"hc/sub0", "sub0"}) {
        CHECK(rack.cli_json({"submit", "sleep_ms", "--on", on, "--scalar", "int64:0", "--wait"}).at("state") ==
              "completed");
    }
    CHECK(error_code_of(
              rack.cli({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait", "--json"}).json()) ==
          "WORKER_DIED");

    net.set_link("hb", true);
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
    // hb kept running through the partition and took the L4's new session.
    CHECK(has_log_line(hb, {"L4 rack attached from", "session 2"}));
}

TEST_CASE("a delay on the link below lost_after slows tasks and loses nothing", "[remote][netns]") {
    if (const std::string why = TestNetwork::unavailable(); !why.empty()) {
        CANOPY_SKIP(why);
    }
    TestNetwork net({"rack", "hb"});
    Daemon hb(host_config("hb"), {}, net.enter("hb"));
    // 100 ms each way: netem on both ends of the link, or where the kernel has no netem a relay in the L4's
    // namespace that holds every byte back as long.
    std::unique_ptr<DelayRelay> relay;
    std::string address = at(net, "hb");
    if (!net.set_delay("hb", 100)) {
        relay = std::make_unique<DelayRelay>(net.netns_path("rack"), net.address("hb"), PORT,
                                             std::chrono::milliseconds(100));
        address = loopback(relay->port());
    }
    // Keepalive pings go every lost_after / 3 and must be answered as soon: 667 ms against the 200 ms round trip,
    // and under the sanitizers, which slow gRPC's threads several times, 1667 ms.
    const std::int64_t lost_after_ms = canopy::testing::SANITIZED ? 5000 : 2000;
    Daemon rack(l4_config({remote_node("hb", address, "insecure", lost_after_ms)}, INSECURE_PEERS), {},
                net.enter("rack"));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    const auto begin = std::chrono::steady_clock::now();
    for (int i = 0; i < 3; ++i) {
        CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
              "completed");
    }
    // Each task crosses the link there and back.
    CHECK(std::chrono::steady_clock::now() - begin >= std::chrono::milliseconds(3 * 200));
    const json status = rack.cli_json({"status"});
    CHECK(worker_at(status, "/hb").at("state") == "running");
    CHECK(worker_at(status, "/hb").at("restarts") == 0);
}

TEST_CASE("SIGKILL of a remote canopyd between namespaces fails its task and the host returns as a new incarnation",
          "[remote][netns]") {
    if (const std::string why = TestNetwork::unavailable(); !why.empty()) {
        CANOPY_SKIP(why);
    }
    TestNetwork net({"rack", "hb"});
    auto hb = std::make_unique<Daemon>(host_config("hb"), std::map<std::string, std::string>{}, net.enter("hb"));
    Daemon rack(l4_config({remote_node("hb", at(net, "hb"), "insecure")}, INSECURE_PEERS), {}, net.enter("rack"));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    const auto first_pid = worker_at(rack.cli_json({"status"}), "/hb/sub0").at("pid");
    const json slow = rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:3000"});
    REQUIRE(eventually_started(rack, slow.at("id").get<std::uint64_t>()));
    REQUIRE(::kill(hb->pid(), SIGKILL) == 0);
    const json failed = rack.cli_json({"wait", slow.at("id").dump()});
    CHECK(failed.at("error").at("code") == "WORKER_DIED");
    CHECK_THAT(failed.at("error").at("message").get<std::string>(),
               Catch::Contains("host hb at " + at(net, "hb") + " lost"));
    hb.reset();
    Daemon hb_again(host_config("hb"), {}, net.enter("hb"));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    CHECK(worker_at(rack.cli_json({"status"}), "/hb/sub0").at("pid") != first_pid);
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
}

TEST_CASE("a copy between two remote hosts whose staging buffer finds no room on the L4's host fails naming it, and "
          "the L4 serves on",
          "[remote][netns]") {
    if (const std::string why = TestNetwork::unavailable(); !why.empty()) {
        CANOPY_SKIP(why);
    }
    TestNetwork net{{"rack", "hb", "hc"}};
    Daemon hb{host_config("hb"), {}, net.enter("hb")};
    Daemon hc{host_config("hc"), {}, net.enter("hc")};
    // The L4's /dev/shm holds its mailboxes, not a staging buffer of 64 MiB.
    Daemon rack{l4_config({remote_node("hb", at(net, "hb"), "insecure"), remote_node("hc", at(net, "hc"), "insecure")},
                          INSECURE_PEERS),
                {},
                net.enter("rack", 16 << 20)};
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    REQUIRE(eventually_running(rack, "/hc/sub0"));
    const std::string n = std::to_string(64 << 20);
    const std::string on_hb = rack.cli_json({"buffer", "create", "--bytes", n, "--on", "hb"}).at("id");
    const std::string on_hc = rack.cli_json({"buffer", "create", "--bytes", n, "--on", "hc"}).at("id");
    const Output o = rack.cli({"submit", "copy", "--on", "hb/sub0", "--in", on_hc + ":uint8:" + n, "--out",
                               on_hb + ":uint8:" + n, "--wait", "--json"});
    INFO(o.out + o.err);
    CHECK(error_code_of(o.json()) == "BAD_REQUEST");
    CHECK_THAT(error_message_of(o.json()), Catch::Contains("copy across hosts: the staging buffer of " + n +
                                                           " bytes on this host could not be made") &&
                                               Catch::Contains("/dev/shm has no room"));
    // Nothing of the staging buffer is left, and the L4 serves on, across hosts too.
    CHECK(rack.cli_json({"buffer", "list"}).at("buffers").size() == 2);
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
}

TEST_CASE("a copy between two remote hosts gets one timeout for both its stages: the second has what the first "
          "left",
          "[remote][netns]") {
    if (const std::string why = TestNetwork::unavailable(); !why.empty()) {
        CANOPY_SKIP(why);
    }
    TestNetwork net{{"rack", "hb", "hc"}};
    Daemon hb{host_config("hb"), {}, net.enter("hb")};
    Daemon hc{host_config("hc"), {}, net.enter("hc")};
    // 250 ms each way to both hosts, so that each stage (one Read or Write stream, one round trip) takes 500 ms
    // and a little: within the 750 ms timeout alone, past it together.
    constexpr int DELAY_MS = 250;
    constexpr int TIMEOUT_MS = 750;
    std::vector<std::unique_ptr<DelayRelay>> relays;
    const auto delayed = [&](const std::string& host) {
        if (net.set_delay(host, DELAY_MS)) {
            return at(net, host);
        }
        relays.push_back(std::make_unique<DelayRelay>(net.netns_path("rack"), net.address(host), PORT,
                                                      std::chrono::milliseconds(DELAY_MS)));
        return loopback(relays.back()->port());
    };
    const std::string hb_at = delayed("hb");
    const std::string hc_at = delayed("hc");
    const std::int64_t lost_after_ms = canopy::testing::SANITIZED ? 8000 : 4000;
    json extra = INSECURE_PEERS;
    extra["supervision"] = {{"backoff_initial_ms", 10},
                            {"backoff_max_ms", 200},
                            {"drain_timeout_ms", 2000},
                            {"task_timeout_ms", TIMEOUT_MS}};
    Daemon rack{l4_config({remote_node("hb", hb_at, "insecure", lost_after_ms),
                           remote_node("hc", hc_at, "insecure", lost_after_ms)},
                          extra),
                {},
                net.enter("rack")};
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    REQUIRE(eventually_running(rack, "/hc/sub0"));
    const std::string on_hb = rack.cli_json({"buffer", "create", "--bytes", "4096", "--on", "hb"}).at("id");
    const std::string on_hc = rack.cli_json({"buffer", "create", "--bytes", "4096", "--on", "hc"}).at("id");
    const std::string here = rack.create_buffer(4096);
    // One stage, hc to the L4's host, fits the timeout.
    const Output one = rack.cli(
        {"submit", "copy", "--on", "sub0", "--in", on_hc + ":uint8:4096", "--out", here + ":uint8:4096", "--wait"});
    INFO(one.out + one.err);
    CHECK(one.rc == 0);
    // Two stages, hc to hb through the L4's host, do not.
    const Output two = rack.cli({"submit", "copy", "--on", "hb/sub0", "--in", on_hc + ":uint8:4096", "--out",
                                 on_hb + ":uint8:4096", "--wait", "--json"});
    INFO(two.out + two.err);
    CHECK(error_code_of(two.json()) == "TIMEOUT");
    CHECK_THAT(error_message_of(two.json()),
               Catch::Contains("copy across hosts, from the host of remote node /hc to the host of remote node /hb") &&
                   Catch::Contains("the task's timeout of " + std::to_string(TIMEOUT_MS) + " ms ran out in its"));
    // The staging buffer is released, and both hosts serve on.
    CHECK(rack.cli_json({"buffer", "list"}).at("buffers").size() == 3);
    const json status = rack.cli_json({"status"});
    CHECK(worker_at(status, "/hb").at("restarts") == 0);
    CHECK(worker_at(status, "/hc").at("restarts") == 0);
}

TEST_CASE("a graph crosses three hosts through copy, its bytes moving between hosts that share no memory",
          "[remote][netns]") {
    if (const std::string why = TestNetwork::unavailable(); !why.empty()) {
        CANOPY_SKIP(why);
    }
    ThreeHosts hosts;
    Daemon& rack = hosts.rack;
    REQUIRE(eventually_running(rack, "/hb/chip0"));
    REQUIRE(eventually_running(rack, "/hc/sub0"));
    constexpr std::uint32_t N = 1200000; // 4.8 MB of float32: more than one chunk of a stream
    static_assert(N * 4 > canopy::daemon::MAX_CHUNK_BYTES);
    const std::string bytes = std::to_string(N * 4);
    const std::string on_hb = rack.cli_json({"buffer", "create", "--bytes", bytes, "--on", "hb"}).at("id");
    const std::string on_hc = rack.cli_json({"buffer", "create", "--bytes", bytes, "--on", "hc"}).at("id");
    const std::string here = rack.create_buffer(N * 4);
    const auto view = [&](const std::string& id) { return json{{"buffer", id}, {"dtype", "float32"}, {"shape", {N}}}; };
    // iota on hc; hc -> hb (staged through the L4's host); scale on hb's chip; hb -> the L4's host.
    const json graph = {
        {"tasks",
         {{{"name", "iota"},
           {"kernel", "iota"},
           {"on", "hc/sub0"},
           {"args", {{{"tensor", view(on_hc)}, {"tag", "output"}}}}},
          {{"name", "to_hb"},
           {"kernel", "copy"},
           {"on", "hb/sub0"},
           {"args", {{{"tensor", view(on_hc)}, {"tag", "input"}}, {{"tensor", view(on_hb)}, {"tag", "output"}}}}},
          {{"name", "scale"},
           {"kernel", "scale"},
           {"on", "hb/chip0"},
           {"args", {{{"tensor", view(on_hb)}, {"tag", "inout"}}, {{"scalar", {{"float32", 0.5}}}}}}},
          {{"name", "home"},
           {"kernel", "copy"},
           {"on", "sub0"},
           {"args", {{{"tensor", view(on_hb)}, {"tag", "input"}}, {{"tensor", view(here)}, {"tag", "output"}}}}}}}};
    const auto file = rack.dir() / "graph.json";
    std::ofstream(file) << graph.dump();
    const json result = rack.cli_json({"run", file.string(), "--wait"});
    INFO(result.dump());
    for (const json& t : result.at("tasks")) {
        CHECK(t.at("state") == "completed");
    }
    // Every element came through: element i is i / 2.
    const auto out = rack.dir() / "here.bin";
    REQUIRE(rack.cli({"buffer", "read", here, "--to", out.string()}).rc == 0);
    std::ifstream in(out, std::ios::binary);
    std::vector<float> values(N);
    in.read(reinterpret_cast<char*>(values.data()), N * 4);
    REQUIRE(in.gcount() == N * 4);
    std::size_t wrong = 0;
    for (std::uint32_t i = 0; i < N; ++i) {
        wrong += values[i] != static_cast<float>(i) * 0.5f;
    }
    CHECK(wrong == 0);
    // The staging buffer of the copy between hb and hc is gone from the L4's host.
    CHECK(rack.cli_json({"buffer", "list"}).at("buffers").size() == 3);
}

namespace {

// A tensor argument over `id` as float32 of `shape`, at `offset` bytes.
json arg(const std::string& id, std::vector<std::uint32_t> shape, const std::string& tag, std::uint64_t offset = 0) {
    return {{"tensor", {{"buffer", id}, {"dtype", "float32"}, {"shape", shape}, {"byte_offset", offset}}},
            {"tag", tag}};
}

// The float32 values of `count` elements at `offset` of buffer `id`, read through daemon `d`.
std::vector<float> read_floats(const Daemon& d, const std::string& id, std::uint64_t offset, std::size_t count) {
    const auto file = d.dir() / ("read-" + std::to_string(offset) + ".bin");
    const Output o = d.cli({"buffer", "read", id, "--to", file.string(), "--offset", std::to_string(offset), "--bytes",
                            std::to_string(count * 4)});
    INFO(o.err);
    REQUIRE(o.rc == 0);
    std::ifstream in(file, std::ios::binary);
    std::vector<float> values(count);
    in.read(reinterpret_cast<char*>(values.data()), static_cast<std::streamsize>(count * 4));
    REQUIRE(static_cast<std::size_t>(in.gcount()) == count * 4);
    return values;
}

} // namespace

TEST_CASE("every built-in runs on hb/chip0 and hc/sub0 of two hosts, its results read back through the L4",
          "[remote][netns]") {
    if (const std::string why = TestNetwork::unavailable(); !why.empty()) {
        CANOPY_SKIP(why);
    }
    ThreeHosts hosts;
    Daemon& rack = hosts.rack;
    REQUIRE(eventually_running(rack, "/hb/chip0"));
    REQUIRE(eventually_running(rack, "/hc/sub0"));
    constexpr std::uint32_t N = 256;
    for (const auto& [on, host] : {std::pair<std::string, std::string>{"hb/chip0", "hb"}, {"hc/sub0", "hc"}}) {
        INFO(on);
        const bool chip = on.find("chip") != std::string::npos;
        // x, y, z: N floats each; s: one; A, B, C: 16 x 16 (matmul runs on chips alone).
        const std::string v =
            rack.cli_json({"buffer", "create", "--bytes", std::to_string(4 * (3 * N + 1)), "--on", host}).at("id");
        const std::string m =
            rack.cli_json({"buffer", "create", "--bytes", std::to_string(3 * 256 * 4), "--on", host}).at("id");
        json tasks =
            json::array({task("fill", "fill", on, {arg(v, {N}, "output"), float32_arg(1.5)}),
                         task("iota", "iota", on, {arg(v, {N}, "output", 4 * N)}),
                         task("axpy", "axpy", on, {arg(v, {N}, "input"), arg(v, {N}, "inout", 4 * N), float32_arg(2)}),
                         task("scale", "scale", on, {arg(v, {N}, "inout", 4 * N), float32_arg(0.5)}),
                         task("copy", "copy", on, {arg(v, {N}, "input", 4 * N), arg(v, {N}, "output", 8 * N)}),
                         task("sum", "reduce_sum", on, {arg(v, {N}, "input", 8 * N), arg(v, {1}, "output", 12 * N)}),
                         task("sleep", "sleep_ms", on, {int64_arg(1)})});
        std::string symmetric;
        std::string gathered;
        if (chip) {
            // A symmetric buffer of one rank, the host's chip: peer_read and allgather over it.
            symmetric = rack.cli_json({"buffer", "create", "--bytes", std::to_string(4 * N), "--backend", "symmetric",
                                       "--world", on})
                            .at("id");
            gathered = rack.cli_json({"buffer", "create", "--bytes", std::to_string(8 * N), "--on", host}).at("id");
            tasks.push_back(task("iota_s", "iota", on, {arg(symmetric, {N}, "output")}));
            tasks.push_back(task("peer_read", "peer_read", on,
                                 {arg(symmetric, {N}, "input"), arg(gathered, {N}, "output"), int64_arg(0)}));
            tasks.push_back(task("allgather", "allgather", on,
                                 {arg(symmetric, {N}, "input"), arg(gathered, {N}, "output", 4 * N)}));
            tasks.push_back(task("iota16", "iota", on, {arg(m, {16, 16}, "output")}));
            tasks.push_back(task("ones", "fill", on, {arg(m, {16, 16}, "output", 1024), float32_arg(1)}));
            tasks.push_back(
                task("matmul", "matmul", on,
                     {arg(m, {16, 16}, "input"), arg(m, {16, 16}, "input", 1024), arg(m, {16, 16}, "output", 2048)}));
        }
        const auto file = rack.dir() / ("builtins-" + host + ".json");
        std::ofstream(file) << json{{"tasks", tasks}}.dump();
        const json result = rack.cli_json({"run", file.string(), "--wait"});
        INFO(result.dump());
        for (const json& t : result.at("tasks")) {
            CHECK(t.at("state") == "completed");
        }
        // The reference: x = 1.5; y = iota, then 2x + y, then half: 1.5 + i / 2; z = y; s = sum z.
        const std::vector<float> z = read_floats(rack, v, 8 * N, N);
        std::size_t wrong = 0;
        double sum = 0;
        for (std::uint32_t i = 0; i < N; ++i) {
            const float want = 1.5f + static_cast<float>(i) * 0.5f;
            wrong += z[i] != want;
            sum += want;
        }
        CHECK(wrong == 0);
        CHECK(read_floats(rack, v, 12 * N, 1)[0] == static_cast<float>(sum));
        if (chip) {
            // peer_read of rank 0 and the allgather of a world of one both give S, which is iota.
            const std::vector<float> g = read_floats(rack, gathered, 0, 2 * N);
            std::size_t bad = 0;
            for (std::uint32_t i = 0; i < 2 * N; ++i) {
                bad += g[i] != static_cast<float>(i % N);
            }
            CHECK(bad == 0);
            // C[i][j] = sum over k of (16 i + k) = 256 i + 120.
            const std::vector<float> c = read_floats(rack, m, 2048, 256);
            std::size_t off = 0;
            for (std::uint32_t i = 0; i < 256; ++i) {
                off += c[i] != static_cast<float>(256 * (i / 16) + 120);
            }
            CHECK(off == 0);
        }
    }
}
