// Buffers on a remote node's host: made there for the L4's session, used by tasks on that host alone, stale once
// the session ends, and released by the node when it does.
#include "daemon/remote_call.h"
#include "tests/remote/remote_fixture.h"
#include "tests/skip.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <csignal>
#include <cstring>
#include <filesystem>
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

    // The L4's own workers cannot reach it.
    Output o = rack.cli(
        {"submit", "fill", "--on", "sub0", "--out", id + ":float32:1024", "--scalar", "float32:1", "--wait", "--json"});
    CHECK(o.rc != 0);
    CHECK(error_code_of(o.json()) == "UNREACHABLE_BUFFER");
    CHECK_THAT(error_message_of(o.json()),
               Catch::Contains("is on the host of remote node /hb, which /sub0 cannot reach"));
    // Device memory is a chip's: a sub has none, and the host itself has posix_shm buffers.
    o = rack.cli({"buffer", "create", "--bytes", "4096", "--on", "hb/sub0", "--backend", "vmm", "--json"});
    CHECK(o.rc != 0);
    CHECK(error_code_of(o.json()) == "BAD_REQUEST");
    CHECK_THAT(error_message_of(o.json()), Catch::Contains("a buffer on remote node /hb is a posix_shm buffer of its "
                                                           "host (--on hb) or the device memory of one of its chips"));

    // Released through the L4 behind a task that holds it and a fill queued after that: new tasks are refused
    // from the moment the release is read, the queued fill still runs on the host, and then the buffer is gone
    // on the host too.
    RawClient c(rack.socket());
    const json view = tensor_arg(id, "inout", {1024});
    const json held = c.request({{"op", "submit"}, {"task", sleep_task("hold", "hb/sub0", 1000, {view})}});
    REQUIRE(held.at("ok") == true);
    const json queued =
        c.request({{"op", "submit"},
                   {"task", task("refill", "fill", "hb/sub0", {tensor_arg(id, "output", {1024}), float32_arg(3)})}});
    REQUIRE(queued.at("ok") == true);
    RawClient releaser(rack.socket());
    releaser.send_frame(json{{"op", "buffer.release"}, {"buffer", id}}.dump());
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (c.request({{"op", "buffer.show"}, {"buffer", id}}).at("ok") == true &&
           std::chrono::steady_clock::now() < deadline) {
    }
    const json late =
        c.request({{"op", "submit"},
                   {"task", task("late", "fill", "hb/sub0", {tensor_arg(id, "output", {1024}), float32_arg(4)})}});
    CHECK(error_code_of(late) == "STALE_BUFFER");
    CHECK_THAT(error_message_of(late), Catch::Contains(id + " was released"));
    const auto released = releaser.read_reply(std::chrono::seconds(30));
    REQUIRE(released.has_value());
    CHECK(released->at("ok") == true);
    const json refill = c.request({{"op", "wait"}, {"task_id", queued.at("task").at("id")}});
    CHECK(refill.at("task").at("state") == "completed");
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

    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
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
    // The killed hb could not unlink its buffer's shm object; its journal names it, and the fixture unlinks what
    // the journal names once the daemon is reaped, so the test leaves nothing in /dev/shm.
    std::vector<std::string> left;
    for (const auto& entry : std::filesystem::directory_iterator(hb->dir() / "state" / "journal")) {
        left.push_back(entry.path().filename().string());
    }
    REQUIRE(left.size() == 1);
    CHECK(std::filesystem::exists("/dev/shm/" + left[0]));
    hb.reset();
    CHECK_FALSE(std::filesystem::exists("/dev/shm/" + left[0]));
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

namespace {

// The bytes of buffer `id` as daemon `d` reads them through its CLI.
std::string bytes_of(const Daemon& d, const std::string& id, const std::string& file) {
    const auto path = d.dir() / file;
    const Output o = d.cli({"buffer", "read", id, "--to", path.string()});
    INFO(o.err);
    REQUIRE(o.rc == 0);
    return read_file(path.string());
}

} // namespace

TEST_CASE("the bytes of a remote host's buffer are written and read through the L4, and copies cross hosts both ways",
          "[remote]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    json config = l4_config({remote_node("hb", loopback(port), "insecure")});
    config["node"]["nodes"].push_back(
        {{"name", "n0"},
         {"level", 3},
         {"chips", json::array({{{"device", 0}, {"backend", "sim"}}, {{"device", 1}, {"backend", "sim"}}})}});
    Daemon rack(config);
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    // Three chunks and a part of one: the streams' chunking is crossed, and a whole chunk comes back from hb within
    // the largest message an L4 takes from a node.
    const std::size_t n = 3 * canopy::daemon::MAX_CHUNK_BYTES + 4096;
    const std::string N = std::to_string(n);
    const std::string remote = rack.cli_json({"buffer", "create", "--bytes", N, "--on", "hb"}).at("id");

    // buffer write and read through the L4's socket: the bytes land on the host, and come back.
    const std::string first = pattern_bytes(n, 1);
    write_file(rack.dir(), "first.bin", first);
    Output o = rack.cli({"buffer", "write", remote, "--from", (rack.dir() / "first.bin").string()});
    INFO(o.err);
    REQUIRE(o.rc == 0);
    CHECK(bytes_of(hb, remote, "on-hb.bin") == first);
    CHECK(bytes_of(rack, remote, "through-rack.bin") == first);
    // A range of it, at an offset.
    o = rack.cli({"buffer", "read", remote, "--to", (rack.dir() / "part.bin").string(), "--offset", "1048570",
                  "--bytes", "100"});
    REQUIRE(o.rc == 0);
    CHECK(read_file((rack.dir() / "part.bin").string()) == first.substr(1048570, 100));
    // The base64 form of the protocol too.
    const json part =
        RawClient(rack.socket()).request({{"op", "buffer.read"}, {"buffer", remote}, {"offset", 7}, {"bytes", 5}});
    INFO(part.dump());
    CHECK(part.at("rest") == n - 12);

    // copy from this host to the remote one, on the remote host's worker.
    const std::string local = rack.create_buffer(n);
    const std::string second = pattern_bytes(n, 2);
    write_file(rack.dir(), "second.bin", second);
    REQUIRE(rack.cli({"buffer", "write", local, "--from", (rack.dir() / "second.bin").string()}).rc == 0);
    json done = rack.cli_json({"submit", "copy", "--on", "hb/sub0", "--in", local + ":uint8:" + N, "--out",
                               remote + ":uint8:" + N, "--wait"});
    CHECK(done.at("state") == "completed");
    CHECK(bytes_of(hb, remote, "copied-in.bin") == second);

    // copy from the remote host to this one, on this host's worker; float32 views at offsets.
    const std::string back = rack.create_buffer(n);
    done = rack.cli_json({"submit", "copy", "--on", "sub0", "--in", remote + ":float32:1024x256::4096", "--out",
                          back + ":float32:262144", "--wait"});
    CHECK(done.at("state") == "completed");
    CHECK(bytes_of(rack, back, "copied-out.bin").substr(0, 1048576) == second.substr(4096, 1048576));
    // The remote node itself may be named for a copy across hosts.
    done = rack.cli_json(
        {"submit", "copy", "--on", "hb", "--in", remote + ":uint8:" + N, "--out", back + ":uint8:" + N, "--wait"});
    CHECK(done.at("state") == "completed");
    CHECK(bytes_of(rack, back, "whole.bin") == second);

    // What a copy across hosts refuses, each by name.
    o = rack.cli({"submit", "copy", "--on", "hb/sub0", "--in", local + ":float32:64:2", "--out", remote + ":float32:64",
                  "--wait", "--json"});
    CHECK(error_code_of(o.json()) == "BAD_REQUEST");
    CHECK_THAT(error_message_of(o.json()), Catch::Contains("args[0] is a strided view"));
    o = rack.cli({"submit", "copy", "--on", "hb/sub0", "--in", local + ":int32:64", "--out", remote + ":float32:64",
                  "--wait", "--json"});
    CHECK(error_code_of(o.json()) == "BAD_REQUEST");
    CHECK_THAT(error_message_of(o.json()), Catch::Contains("the dtypes must agree"));
    o = rack.cli({"submit", "copy", "--on", "sub0", "--in", local + ":uint8:64", "--out", remote + ":uint8:64",
                  "--wait", "--json"});
    CHECK(error_code_of(o.json()) == "UNREACHABLE_BUFFER");
    CHECK_THAT(error_message_of(o.json()), Catch::Contains("which /sub0 cannot reach"));
    const std::string symmetric =
        rack.cli_json({"buffer", "create", "--bytes", "4096", "--backend", "symmetric", "--world", "n0/chip0,n0/chip1"})
            .at("id");
    o = rack.cli({"submit", "copy", "--on", "hb/sub0", "--in", symmetric + ":uint8:64", "--out", remote + ":uint8:64",
                  "--wait", "--json"});
    CHECK(error_code_of(o.json()) == "UNREACHABLE_BUFFER");
    CHECK_THAT(error_message_of(o.json()), Catch::Contains("args[0] is a symmetric buffer"));
    // A world lies on one host, whichever comes first.
    for (const std::string world : {"n0/chip0,hb/chip0", "hb/chip0,n0/chip0"}) {
        o = rack.cli({"buffer", "create", "--bytes", "4096", "--backend", "symmetric", "--world", world, "--json"});
        INFO(world);
        CHECK(error_code_of(o.json()) == "BAD_REQUEST");
        CHECK_THAT(error_message_of(o.json()), Catch::Contains("a symmetric buffer's world lies on one host"));
    }

    // Device memory of this host crosses staged through a posix_shm buffer, which the copy releases.
    const std::string device =
        rack.cli_json({"buffer", "create", "--bytes", N, "--on", "n0/chip0", "--backend", "vmm"}).at("id");
    REQUIRE(rack.cli({"buffer", "write", device, "--from", (rack.dir() / "first.bin").string()}).rc == 0);
    done = rack.cli_json({"submit", "copy", "--on", "hb/sub0", "--in", device + ":uint8:" + N, "--out",
                          remote + ":uint8:" + N, "--wait"});
    CHECK(done.at("state") == "completed");
    CHECK(bytes_of(hb, remote, "from-device.bin") == first);
    REQUIRE(rack.cli({"buffer", "write", remote, "--from", (rack.dir() / "second.bin").string()}).rc == 0);
    done = rack.cli_json({"submit", "copy", "--on", "n0/chip0", "--in", remote + ":uint8:" + N, "--out",
                          device + ":uint8:" + N, "--wait"});
    CHECK(done.at("state") == "completed");
    CHECK(bytes_of(rack, device, "to-device.bin") == second);
    CHECK(rack.cli_json({"buffer", "list"}).at("buffers").size() == 5);
    o = rack.cli(
        {"submit", "fill", "--on", "hb", "--out", remote + ":float32:64", "--scalar", "float32:1", "--wait", "--json"});
    CHECK(error_code_of(o.json()) == "UNKNOWN_WORKER");
    CHECK_THAT(error_message_of(o.json()), Catch::Contains("is a remote node, not a worker"));
    // No fd of a remote buffer exists here.
    const json fd = RawClient(rack.socket()).request({{"op", "buffer.fd"}, {"buffer", remote}});
    INFO(fd.dump());
    CHECK(fd.at("error").at("code") == "BAD_REQUEST");
    CHECK_THAT(fd.at("error").at("message").get<std::string>(), Catch::Contains("this host has no fd of it"));
}

TEST_CASE("a remote host's buffer released on the host itself is stale to its L4's reads and writes", "[remote]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    const std::string id = rack.cli_json({"buffer", "create", "--bytes", "8192", "--on", "hb"}).at("id");
    // A write maps the buffer on hb for the session's later transfers.
    const std::string bytes = pattern_bytes(8192, 5);
    write_file(rack.dir(), "in.bin", bytes);
    REQUIRE(rack.cli({"buffer", "write", id, "--from", (rack.dir() / "in.bin").string()}).rc == 0);
    CHECK(bytes_of(rack, id, "before.bin") == bytes);
    // A client of hb's own socket releases it (as root, which may release any buffer).
    const Output released = hb.cli({"buffer", "release", id});
    INFO(released.err);
    REQUIRE(released.rc == 0);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{"buffer", "read", id, "--to", (rack.dir() / "after.bin").string(), "--json"},
          std::vector<std::string>{"buffer", "write", id, "--from", (rack.dir() / "in.bin").string(), "--json"}}) {
        const Output o = rack.cli(args);
        INFO(args[1] + ": " + o.out + o.err);
        REQUIRE(o.rc != 0);
        CHECK(error_code_of(o.json()) == "STALE_BUFFER");
        CHECK_THAT(error_message_of(o.json()), Catch::Contains("buffer " + id) && Catch::Contains("was released"));
    }
    // A task over it, which hb checks against its registry when it arrives.
    const Output task = rack.cli(
        {"submit", "fill", "--on", "hb/sub0", "--out", id + ":uint8:1024", "--scalar", "int64:7", "--wait", "--json"});
    INFO(task.out + task.err);
    CHECK(error_code_of(task.json()) == "STALE_BUFFER");
    // The session serves on.
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
}

TEST_CASE("a node takes back the queued tasks of an L4 session that ended, and runs the next session's", "[remote]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    {
        Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
        REQUIRE(eventually_running(rack, "/hb/sub0"));
        // hb's own client fills its sub's mailbox (64 frames) with a task of 5 s and 63 short ones behind it; the
        // L4's 20 tasks then wait in hb's supervisor until the first task ends, however long they took to arrive.
        const auto graph = [](const std::string& on, int n, int first_ms, int ms) {
            json tasks = json::array();
            for (int i = 0; i < n; ++i) {
                tasks.push_back({{"name", "t" + std::to_string(i)},
                                 {"kernel", "sleep_ms"},
                                 {"on", on},
                                 {"args", {{{"scalar", {{"int64", i == 0 ? first_ms : ms}}}}}}});
            }
            return json{{"tasks", tasks}}.dump();
        };
        std::ofstream(hb.dir() / "local.json") << graph("sub0", 64, 5000, 1);
        REQUIRE(hb.cli({"run", (hb.dir() / "local.json").string()}).rc == 0);
        std::ofstream(rack.dir() / "remote.json") << graph("hb/sub0", 20, 30, 30);
        REQUIRE(rack.cli({"run", (rack.dir() / "remote.json").string()}).rc == 0);
        // The L4's tasks reach hb, where they wait behind the local ones (no local task waits: the mailbox holds
        // them all).
        const auto queued = [&] {
            return worker_at(hb.cli_json({"status"}), "/sub0").at("queued").get<std::uint64_t>();
        };
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (queued() < 10 && std::chrono::steady_clock::now() < deadline) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
        }
        REQUIRE(queued() >= 10);
        REQUIRE(::kill(rack.pid(), SIGKILL) == 0);
        REQUIRE(rack.wait_exit(std::chrono::seconds(10)).has_value());
    }
    // Nobody waits for their results: hb does not run them.
    CHECK(eventually_logged(hb, {"L4 session 1 ended: took back its", "queued tasks"}));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    const json done = rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:1", "--wait"});
    CHECK(done.at("state") == "completed");
}

TEST_CASE("a buffer in the device memory of a remote host's chip is used there, and its bytes cross hosts staged",
          "[remote]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack, "/hb/chip0"));
    const std::size_t n = 2 * 1048576 + 512;
    const std::string N = std::to_string(n);
    const json created = rack.cli_json({"buffer", "create", "--bytes", N, "--on", "hb/chip0", "--backend", "vmm"});
    const std::string device = created.at("id");
    CHECK(created.at("backend") == "sim_vmm");
    CHECK(created.at("creator") == "/hb");
    CHECK(hb.cli_json({"buffer", "show", device}).at("creator") == "/chip0");

    // Written and read through the L4: staged through a posix_shm buffer on each host.
    const std::string bytes = pattern_bytes(n, 3);
    write_file(rack.dir(), "in.bin", bytes);
    Output o = rack.cli({"buffer", "write", device, "--from", (rack.dir() / "in.bin").string()});
    INFO(o.err);
    REQUIRE(o.rc == 0);
    CHECK(bytes_of(rack, device, "out.bin") == bytes);
    // The chip's tasks use it: scale the first 1024 bytes as int8 by 1 (a round trip through the chip), then fill.
    CHECK(rack.cli_json({"submit", "fill", "--on", "hb/chip0", "--out", device + ":uint8:1024", "--scalar", "int64:7",
                         "--wait"})
              .at("state") == "completed");
    std::string expected = bytes;
    std::fill(expected.begin(), expected.begin() + 1024, '\x07');
    CHECK(bytes_of(rack, device, "filled.bin") == expected);
    // A sub of the host cannot reach device memory: the L4 refuses the task at submit, naming the sub by the L4's
    // path, as it does for a nested node's sub (the host itself would name its own /sub0).
    o = rack.cli({"submit", "fill", "--on", "hb/sub0", "--out", device + ":uint8:1024", "--scalar", "int64:7", "--wait",
                  "--json"});
    CHECK(error_code_of(o.json()) == "UNREACHABLE_BUFFER");
    CHECK_THAT(error_message_of(o.json()), Catch::Contains("sim_vmm buffer cannot be reached from /hb/sub0"));

    // Copies across hosts to and from it.
    const std::string here = rack.create_buffer(n);
    REQUIRE(rack.cli_json({"submit", "copy", "--on", "sub0", "--in", device + ":uint8:" + N, "--out",
                           here + ":uint8:" + N, "--wait"})
                .at("state") == "completed");
    CHECK(bytes_of(rack, here, "here.bin") == expected);
    REQUIRE(rack.cli({"buffer", "write", here, "--from", (rack.dir() / "in.bin").string()}).rc == 0);
    REQUIRE(rack.cli_json({"submit", "copy", "--on", "hb/chip0", "--in", here + ":uint8:" + N, "--out",
                           device + ":uint8:" + N, "--wait"})
                .at("state") == "completed");
    CHECK(bytes_of(rack, device, "back.bin") == bytes);
    // No staging buffer is left behind on either host.
    CHECK(rack.cli_json({"buffer", "list"}).at("buffers").size() == 2);
    CHECK(hb.cli_json({"buffer", "list"}).at("buffers").size() == 1);
}

TEST_CASE("a cuda_vmm buffer of a remote host's chip is written, read and copied across hosts, staged by its chip",
          "[remote][gpu]") {
    if (!std::filesystem::exists("/dev/nvidia0")) {
        CANOPY_SKIP("needs a GPU");
    }
    const std::uint16_t port = free_tcp_port();
    json hb_config = l3_config("hb", loopback(port), "insecure");
    hb_config["node"]["chips"] = json::array({{{"device", 0}, {"backend", "cuda"}}});
    Daemon hb(hb_config);
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure", 3000)}));
    REQUIRE(eventually_running(rack, "/hb/chip0"));
    const std::size_t n = 64 * 1048576 + 12;
    const std::string N = std::to_string(n);
    const json created = rack.cli_json({"buffer", "create", "--bytes", N, "--on", "hb/chip0", "--backend", "vmm"});
    const std::string device = created.at("id");
    CHECK(created.at("backend") == "cuda_vmm");

    const std::string bytes = pattern_bytes(n, 5);
    write_file(rack.dir(), "in.bin", bytes);
    const Output o = rack.cli({"buffer", "write", device, "--from", (rack.dir() / "in.bin").string()});
    INFO(o.err);
    REQUIRE(o.rc == 0);
    CHECK(bytes_of(rack, device, "out.bin") == bytes);
    // The chip's own kernel over it, then the bytes back through the L4.
    REQUIRE(rack.cli_json({"submit", "fill", "--on", "hb/chip0", "--out", device + ":uint8:4096", "--scalar", "int64:9",
                           "--wait"})
                .at("state") == "completed");
    std::string expected = bytes;
    std::fill(expected.begin(), expected.begin() + 4096, '\x09');
    const std::string here = rack.create_buffer(n);
    REQUIRE(rack.cli_json({"submit", "copy", "--on", "sub0", "--in", device + ":uint8:" + N, "--out",
                           here + ":uint8:" + N, "--wait"})
                .at("state") == "completed");
    CHECK(bytes_of(rack, here, "here.bin") == expected);
    CHECK(hb.cli_json({"buffer", "list"}).at("buffers").size() == 1);
}

TEST_CASE("an L4 killed while its copies move bytes to and from its remote host leaves the host serving the next "
          "L4, with nothing of the old session left",
          "[remote]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    {
        Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
        REQUIRE(eventually_running(rack, "/hb/sub0"));
        const std::size_t n = std::size_t{64} << 20;
        const std::string N = std::to_string(n);
        const std::string here = rack.create_buffer(n);
        const std::string there = rack.cli_json({"buffer", "create", "--bytes", N, "--on", "hb"}).at("id");
        // Copies each way, one after another; the L4 dies while a push runs, its bytes on a Write stream of hb's.
        // A batch of copies is queued, and the listing watched until a push of it is seen running; a machine fast
        // enough to finish a batch between two listings gets another batch.
        RawClient listing(rack.socket());
        bool seen_running = false;
        for (int batch = 0; batch < 10 && !seen_running; ++batch) {
            std::vector<std::uint64_t> pushes;
            for (int i = 0; i < 6; ++i) {
                pushes.push_back(rack.cli_json({"submit", "copy", "--on", "hb/sub0", "--in", here + ":uint8:" + N,
                                                "--out", there + ":uint8:" + N})
                                     .at("id")
                                     .get<std::uint64_t>());
                (void)rack.cli_json(
                    {"submit", "copy", "--on", "sub0", "--in", there + ":uint8:" + N, "--out", here + ":uint8:" + N});
            }
            for (bool pending = true; pending && !seen_running;) {
                const json tasks = listing.request({{"op", "tasks"}});
                pending = false;
                for (const auto& t : tasks.at("tasks")) {
                    const bool push = std::find(pushes.begin(), pushes.end(), t.at("id")) != pushes.end();
                    seen_running = seen_running || (push && t.at("state") == "running");
                    pending = pending || (push && (t.at("state") == "queued" || t.at("state") == "running"));
                }
            }
        }
        REQUIRE(seen_running);
        REQUIRE(::kill(rack.pid(), SIGKILL) == 0);
        REQUIRE(rack.wait_exit(std::chrono::seconds(10)).has_value());
        CHECK(eventually_logged(hb, {"L4 session 1 ended: released its 1 buffers"}));
    }
    CHECK(hb.cli_json({"buffer", "list"}).at("buffers").empty());

    // The next L4 is served, and its bytes cross both ways.
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    CHECK(has_log_line(hb, {"L4 rack attached from", "session 2"}));
    const std::size_t n = 1 << 20;
    const std::string N = std::to_string(n);
    const std::string here = rack.create_buffer(n);
    const std::string there = rack.cli_json({"buffer", "create", "--bytes", N, "--on", "hb"}).at("id");
    const std::string bytes = pattern_bytes(n, 11);
    write_file(rack.dir(), "in.bin", bytes);
    REQUIRE(rack.cli({"buffer", "write", here, "--from", (rack.dir() / "in.bin").string()}).rc == 0);
    REQUIRE(rack.cli_json({"submit", "copy", "--on", "hb/sub0", "--in", here + ":uint8:" + N, "--out",
                           there + ":uint8:" + N, "--wait"})
                .at("state") == "completed");
    CHECK(bytes_of(rack, there, "there.bin") == bytes);
    CHECK(hb.cli_json({"buffer", "list"}).at("buffers").size() == 1);
}
