// Every command sends exactly the request of docs/control-protocol.md for its arguments.

#include "protocol/base64.h"
#include "tests/cli/fake_daemon.h"

#include <catch2/catch.hpp>

using namespace canopy::cli;
using namespace canopy::cli::testing;
using canopy::base64_encode;
using nlohmann::json;

namespace {

const json TASK = {{"name", "fill"},       {"id", 7},           {"kernel", "fill"}, {"on", "chip0"},
                   {"state", "completed"}, {"submitted_ns", 1}, {"start_ns", 10},   {"end_ns", 2010}};

// A daemon that answers every op with a plausible success, and buffer.fd as a daemon that has no such op.
FakeReply plausible(const json& request) {
    const std::string op = request.value("op", "");
    if (op == "buffer.fd") {
        return error("BAD_REQUEST", "unknown op \"buffer.fd\"");
    }
    if (op == "buffer.create" || op == "buffer.show") {
        return ok({{"buffer", SHM_BUFFER}});
    }
    if (op == "buffer.list") {
        return ok({{"buffers", {SHM_BUFFER}}});
    }
    if (op == "buffer.write") {
        return ok({{"written", request["attachment"]}});
    }
    if (op == "buffer.read") {
        return ok_with(std::string(request["bytes"].get<std::size_t>(), 'x'), {{"rest", 0}});
    }
    if (op == "submit" || op == "wait") {
        return ok({{"task", TASK}});
    }
    if (op == "run" || op == "tasks") {
        return ok({{"tasks", {TASK}}});
    }
    if (op == "module.load") {
        return ok({{"module", {{"name", request["name"]}, {"format", request["format"]}, {"chips", json::array()}}}});
    }
    if (op == "status") {
        return ok({{"node", {{"name", "a"}, {"level", 3}}}, {"pid", 1}, {"uptime_s", 1}, {"workers", json::array()}});
    }
    if (op == "metrics") {
        return ok({{"text", "canopy_up 1\n"}});
    }
    return ok();
}

} // namespace

TEST_CASE("status, tasks, metrics, shutdown and buffer list send bare ops", "[cli]") {
    CHECK(only_request(plausible, {"status"}) == json{{"op", "status"}, {"id", 1}});
    CHECK(only_request(plausible, {"tasks"}) == json{{"op", "tasks"}, {"id", 1}});
    CHECK(only_request(plausible, {"metrics"}) == json{{"op", "metrics"}, {"id", 1}});
    CHECK(only_request(plausible, {"shutdown"}) == json{{"op", "shutdown"}, {"id", 1}});
    CHECK(only_request(plausible, {"buffer", "list"}) == json{{"op", "buffer.list"}, {"id", 1}});
}

TEST_CASE("worker restart sends the worker's path and needs one", "[cli]") {
    CHECK(only_request(plausible, {"worker", "restart", "/node0/chip1"}) ==
          json{{"op", "worker.restart"}, {"worker", "/node0/chip1"}, {"id", 1}});
    const CliRun missing = run({"worker", "restart"}, "/nonexistent/never/connected.sock");
    CHECK(missing.rc == 2);
    CHECK(missing.err.find("WORKER is required") != std::string::npos);
}

TEST_CASE("buffer create sends only the arguments given", "[cli]") {
    CHECK(only_request(plausible, {"buffer", "create", "--bytes", "4096"}) ==
          json{{"op", "buffer.create"}, {"id", 1}, {"bytes", 4096}});
    CHECK(only_request(plausible, {"buffer", "create", "--bytes", "2M", "--backend", "vmm", "--on", "chip1", "--access",
                                   "r"}) == json{{"op", "buffer.create"},
                                                 {"id", 1},
                                                 {"bytes", 2u << 20},
                                                 {"backend", "vmm"},
                                                 {"on", "chip1"},
                                                 {"access", "r"}});
}

TEST_CASE("buffer create --world becomes a list of chips in rank order", "[cli]") {
    CHECK(only_request(plausible, {"buffer", "create", "--bytes", "1K", "--backend", "symmetric", "--world",
                                   "chip1,chip0"}) == json{{"op", "buffer.create"},
                                                           {"id", 1},
                                                           {"bytes", 1024},
                                                           {"backend", "symmetric"},
                                                           {"world", {"chip1", "chip0"}}});
}

TEST_CASE("buffer create refuses bad sizes, worlds and choices before connecting", "[cli]") {
    const auto usage = [](std::vector<std::string> args, const std::string& expected) {
        const CliRun r = run(std::move(args), "/nonexistent/never/connected.sock");
        CHECK(r.rc == 2);
        CHECK(r.err.find(expected) != std::string::npos);
        CHECK(r.out.empty());
    };
    usage({"buffer", "create", "--bytes", "0"}, "canopy: USAGE: --bytes \"0\": a buffer has at least 1 byte");
    usage({"buffer", "create", "--bytes", "12X"}, "--bytes \"12X\": unknown size suffix");
    usage({"buffer", "create"}, "--bytes is required");
    usage({"buffer", "create", "--bytes", "1", "--backend", "gpu"}, "--backend: gpu not in {shm,vmm,symmetric}");
    usage({"buffer", "create", "--bytes", "1", "--access", "x"}, "--access: x not in {r,w,rw}");
    usage({"buffer", "create", "--bytes", "1", "--world", "chip0"},
          "--world \"chip0\": only a --backend symmetric buffer has a world");
    usage({"buffer", "create", "--bytes", "1", "--backend", "symmetric", "--world", "chip0,,chip1"},
          "--world \"chip0,,chip1\": expected chip paths joined by ','");
}

TEST_CASE("buffer show and release send the buffer ID as the request's id", "[cli]") {
    CHECK(only_request(plausible, {"buffer", "show", "0011..ff.3.1"}) ==
          json{{"op", "buffer.show"}, {"buffer", "0011..ff.3.1"}, {"id", 1}});
    CHECK(only_request(plausible, {"buffer", "release", "weights"}) ==
          json{{"op", "buffer.release"}, {"buffer", "weights"}, {"id", 1}});
}

TEST_CASE("buffer write asks for the buffer's fd, and without one sends the file's bytes as an attachment at the "
          "offset",
          "[cli]") {
    FakeDaemon daemon(plausible);
    const std::string file = write_file(daemon.dir(), "in.bin", std::string("\x00\x01\xfe\xff", 4));
    const CliRun r = run({"buffer", "write", "B", "--from", file, "--offset", "1K"}, daemon.socket_path());
    REQUIRE(r.rc == 0);
    CHECK(daemon.requests() ==
          std::vector<json>{{{"op", "buffer.fd"}, {"buffer", "B"}, {"access", "readwrite"}, {"id", 1}},
                            {{"op", "buffer.write"}, {"buffer", "B"}, {"offset", 1024}, {"attachment", 4}, {"id", 2}}});
    CHECK(daemon.attachments() == std::vector<std::string>{std::string("\x00\x01\xfe\xff", 4)});
    CHECK(r.out == "wrote 4 bytes to B at offset 1024\n");
}

TEST_CASE("buffer read asks for a read-only fd, and without one sends the range asked for", "[cli]") {
    FakeDaemon daemon(plausible);
    const std::string file = daemon.dir() + "/out.bin";
    const CliRun r = run({"buffer", "read", "B", "--to", file, "--offset", "8", "--bytes", "16"}, daemon.socket_path());
    REQUIRE(r.rc == 0);
    CHECK(daemon.requests() ==
          std::vector<json>{
              {{"op", "buffer.fd"}, {"buffer", "B"}, {"access", "read"}, {"id", 1}},
              {{"op", "buffer.read"}, {"buffer", "B"}, {"offset", 8}, {"bytes", 16}, {"attachment", true}, {"id", 2}}});
    CHECK(read_whole_file(file) == std::string(16, 'x'));
}

TEST_CASE("buffer read without --bytes asks buffer.show for the size first", "[cli]") {
    FakeDaemon daemon(plausible);
    const std::string file = daemon.dir() + "/out.bin";
    const CliRun r = run({"buffer", "read", "B", "--to", file, "--offset", "60"}, daemon.socket_path());
    REQUIRE(r.rc == 0);
    CHECK(daemon.requests() ==
          std::vector<json>{
              {{"op", "buffer.show"}, {"buffer", "B"}, {"id", 1}},
              {{"op", "buffer.fd"}, {"buffer", "B"}, {"access", "read"}, {"id", 2}},
              {{"op", "buffer.read"}, {"buffer", "B"}, {"offset", 60}, {"bytes", 4}, {"attachment", true}, {"id", 3}}});
}

TEST_CASE("submit sends the task with tensors in command-line order, then scalars", "[cli]") {
    CHECK(
        only_request(plausible,
                     {"submit", "axpy", "--on", "chip0", "--inout", "Y:float32:64", "--scalar", "float32:2.5", "--in",
                      "X:float32:8x8:8x1:0", "--out", "Z.1.2:int64:4", "--scalar", "int64:-3", "--wait"}) ==
        json{{"op", "submit"},
             {"id", 1},
             {"wait", true},
             {"task",
              {{"kernel", "axpy"},
               {"on", "chip0"},
               {"args",
                {{{"tensor", {{"buffer", "Y"}, {"dtype", "float32"}, {"shape", {64}}}}, {"tag", "inout"}},
                 {{"tensor",
                   {{"buffer", "X"}, {"dtype", "float32"}, {"shape", {8, 8}}, {"strides", {8, 1}}, {"byte_offset", 0}}},
                  {"tag", "input"}},
                 {{"tensor", {{"buffer", "Z.1.2"}, {"dtype", "int64"}, {"shape", {4}}}}, {"tag", "output"}},
                 {{"scalar", {{"float32", 2.5}}}},
                 {{"scalar", {{"int64", -3}}}}}}}}});
}

TEST_CASE("submit --tf32 sends the built-in's launch option, and nothing without it", "[cli]") {
    const json task = only_request(plausible, {"submit", "matmul", "--on", "chip0", "--in", "A:float32:4x4", "--in",
                                               "B:float32:4x4", "--out", "C:float32:4x4", "--tf32"})["task"];
    CHECK(task["launch"] == json{{"tf32", true}});
    const json plain = only_request(plausible, {"submit", "matmul", "--on", "chip0", "--in", "A:float32:4x4", "--in",
                                                "B:float32:4x4", "--out", "C:float32:4x4"})["task"];
    CHECK_FALSE(plain.contains("launch"));
}

TEST_CASE("submit keeps the order of repeated options interleaved with others", "[cli]") {
    const json request =
        only_request(plausible, {"submit", "k", "--out", "A:int8:1", "--in", "B:int8:1", "--out", "C:int8:1", "--inout",
                                 "D:int8:1", "--in", "E:int8:1", "--on", "sub0"});
    std::vector<std::string> order;
    for (const auto& arg : request["task"]["args"]) {
        order.push_back(arg["tensor"]["buffer"].get<std::string>() + "/" + arg["tag"].get<std::string>());
    }
    CHECK(order == std::vector<std::string>{"A/output", "B/input", "C/output", "D/inout", "E/input"});
    CHECK(request["wait"] == false);
}

TEST_CASE("submit with no arguments sends an empty args list", "[cli]") {
    CHECK(only_request(plausible, {"submit", "sleep_ms", "--on", "/sub1"}) ==
          json{{"op", "submit"},
               {"id", 1},
               {"wait", false},
               {"task", {{"kernel", "sleep_ms"}, {"on", "/sub1"}, {"args", json::array()}}}});
}

TEST_CASE("submit refuses a bad SPEC or scalar with exit 2 naming it", "[cli]") {
    const auto usage = [](std::vector<std::string> args, const std::string& expected) {
        const CliRun r = run(std::move(args), "/nonexistent/never/connected.sock");
        CHECK(r.rc == 2);
        CHECK(r.err.find("canopy: USAGE: " + expected) == 0);
    };
    usage({"submit", "fill", "--on", "chip0", "--out", "B:float32"}, "--out \"B:float32\": expected BUFFER_ID");
    usage({"submit", "fill", "--on", "chip0", "--inout", "B:f32:4"}, "--inout \"B:f32:4\": unknown DTYPE");
    usage({"submit", "fill", "--on", "chip0", "--in", "B:float32:4x0"}, "--in \"B:float32:4x0\": SHAPE");
    usage({"submit", "fill", "--on", "chip0", "--scalar", "float32:x"}, "--scalar \"float32:x\"");
    usage({"submit", "fill", "--in", "B:float32:4"}, "--on is required");
    usage({"submit", "--on", "chip0"}, "KERNEL is required");
    const CliRun missing = run({"submit", "fill", "--on", "chip0", "--in"}, "");
    CHECK(missing.rc == 2);
    CHECK(missing.err.find("canopy: USAGE: --in: 1 required SPEC missing") == 0);
}

TEST_CASE("run sends the graph file, and under --wait asks the daemon to wait", "[cli]") {
    FakeDaemon daemon(plausible);
    const json graph = {{"tasks",
                         {{{"name", "init"},
                           {"kernel", "fill"},
                           {"on", "chip0"},
                           {"args",
                            {{{"tensor", {{"buffer", "B"}, {"dtype", "float32"}, {"shape", {4}}}}, {"tag", "output"}},
                             {{"scalar", {{"float32", 1.5}}}}}}}}}};
    const std::string file = write_file(daemon.dir(), "graph.json", graph.dump());
    REQUIRE(run({"run", file}, daemon.socket_path()).rc == 0);
    REQUIRE(run({"run", file, "--wait"}, daemon.socket_path()).rc == 0);
    const auto requests = daemon.requests();
    REQUIRE(requests.size() >= 2);
    CHECK(requests[0] == json{{"op", "run"}, {"id", 1}, {"graph", graph}, {"wait", false}});
    CHECK(requests[1] == json{{"op", "run"}, {"id", 1}, {"graph", graph}, {"wait", true}, {"progress", false}});
}

TEST_CASE("run refuses a missing, non-JSON or task-less graph file with exit 2", "[cli]") {
    FakeDaemon daemon(plausible);
    const auto usage = [&](const std::string& file, const std::string& expected) {
        const CliRun r = run({"run", file}, daemon.socket_path());
        CHECK(r.rc == 2);
        CHECK(r.err.find(expected) != std::string::npos);
    };
    usage(daemon.dir() + "/missing.json", "GRAPH \"" + daemon.dir() + "/missing.json\": cannot open: No such file");
    usage(write_file(daemon.dir(), "bad.json", "{\"tasks\": ["), "bad.json\": not valid JSON");
    usage(write_file(daemon.dir(), "list.json", "[1]"), "list.json\": expected an object with a \"tasks\" array");
    CHECK(daemon.requests().empty());
}

TEST_CASE("wait sends the task id as an integer", "[cli]") {
    CHECK(only_request(plausible, {"wait", "7"}) == json{{"op", "wait"}, {"id", 1}, {"task_id", 7}});
    const CliRun r = run({"wait", "x7"}, "/nonexistent/never/connected.sock");
    CHECK(r.rc == 2);
    CHECK(r.err.find("TASK_ID \"x7\": expected a task id") != std::string::npos);
}

TEST_CASE("module load sends the file as base64 with its format", "[cli]") {
    FakeDaemon daemon(plausible);
    const std::string ptx = ".version 8.0\n.target sm_90\n";
    const std::string cubin = std::string("\x7f"
                                          "ELF\x02\x01\x00",
                                          7);
    const std::string named_ptx = write_file(daemon.dir(), "k.ptx", "anything");
    const std::string sniffed_ptx = write_file(daemon.dir(), "kernels.txt", ptx);
    const std::string named_cubin = write_file(daemon.dir(), "k.cubin", "x");
    const std::string sniffed_cubin = write_file(daemon.dir(), "k.bin", cubin);
    for (const auto& file : {named_ptx, sniffed_ptx, named_cubin, sniffed_cubin}) {
        REQUIRE(run({"module", "load", "mine", file}, daemon.socket_path()).rc == 0);
    }
    const auto requests = daemon.requests();
    REQUIRE(requests.size() == 4);
    CHECK(requests[0] == json{{"op", "module.load"},
                              {"id", 1},
                              {"name", "mine"},
                              {"format", "ptx"},
                              {"data", base64_encode("anything")}});
    CHECK(requests[1]["format"] == "ptx");
    CHECK(requests[1]["data"] == base64_encode(ptx));
    CHECK(requests[2]["format"] == "cubin");
    CHECK(
        requests[3] ==
        json{{"op", "module.load"}, {"id", 1}, {"name", "mine"}, {"format", "cubin"}, {"data", base64_encode(cubin)}});
}

TEST_CASE("module load takes --format and refuses a file it cannot classify", "[cli]") {
    FakeDaemon daemon(plausible);
    const std::string file = write_file(daemon.dir(), "k.bin", "plain bytes");
    CHECK(run({"module", "load", "m", file, "--format", "cubin"}, daemon.socket_path()).rc == 0);
    CHECK(daemon.requests().at(0)["format"] == "cubin");
    const CliRun r = run({"module", "load", "m", file}, daemon.socket_path());
    CHECK(r.rc == 2);
    CHECK(r.err.find("FILE \"" + file + "\": cannot tell PTX from cubin") != std::string::npos);
    const CliRun missing = run({"module", "load", "m", daemon.dir() + "/none.ptx"}, daemon.socket_path());
    CHECK(missing.rc == 2);
    CHECK(missing.err.find("none.ptx\": cannot open") != std::string::npos);
}

TEST_CASE("requests on one connection carry ids 1, 2, 3", "[cli]") {
    // A read to the end of a buffer without a mappable fd is buffer.show, buffer.fd, then buffer.read on one
    // connection.
    FakeDaemon daemon(plausible);
    REQUIRE(run({"buffer", "read", "B", "--to", daemon.dir() + "/out.bin"}, daemon.socket_path()).rc == 0);
    std::vector<json> ids;
    for (const auto& request : daemon.requests()) {
        ids.push_back(request["id"]);
    }
    CHECK(ids == std::vector<json>{1, 2, 3});
}

TEST_CASE("the socket is --socket, else $CANOPY_SOCKET", "[cli]") {
    FakeDaemon daemon(plausible);
    Environment env = test_env();
    env.socket_env = daemon.socket_path();
    CHECK(run({"status"}, "", env).rc == 0);
    CHECK(daemon.requests().size() == 1);
    env.socket_env = "/nonexistent/env.sock";
    CHECK(run({"status"}, daemon.socket_path(), env).rc == 0);
    CHECK(daemon.requests().size() == 2);
    const CliRun r = run({"status"}, "", env);
    CHECK(r.rc == 3);
    CHECK(r.err.find("/nonexistent/env.sock") != std::string::npos);
    CHECK(Environment{}.socket_path("") == "/run/canopy/canopy.sock");
}
