// The CLI's module commands and module-kernel options: module load (formats, the summary line, errors that name
// the file or the frame limit), module list, and submit --param/--grid/--block/--shared.
#include "cli/app.h"
#include "fake_daemon.h"
#include "protocol/base64.h"

#include <catch2/catch.hpp>

using namespace canopy::cli;
using namespace canopy::cli::testing;
using canopy::base64_encode;
using nlohmann::json;

namespace {

const json MODULE = {{"name", "m"}, {"bytes", 120}, {"format", "ptx"}, {"chips", {"/chip0", "/node0/chip1"}}};

FakeReply modules_ok(const json& request) {
    const std::string op = request.value("op", "");
    if (op == "module.load") {
        return ok({{"module", MODULE}});
    }
    if (op == "module.list") {
        return ok({{"modules", {MODULE}}});
    }
    return ok({{"task", {{"name", "t"}, {"id", 1}, {"state", "completed"}}}});
}

const char* SPEC = "00112233445566778899aabbccddeeff.1.1:float32:256";

} // namespace

TEST_CASE("module load prints one line naming the module, its format, size and chips", "[cli][module]") {
    FakeDaemon daemon(modules_ok);
    const std::string file = write_file(daemon.dir(), "k.ptx", ".version 8.0\n.target sm_90\n");
    const CliRun human = run({"module", "load", "m", file}, daemon.socket_path());
    CHECK(human.rc == 0);
    CHECK(human.out == "loaded module m (ptx, 120 bytes) on /chip0, /node0/chip1\n");
    const CliRun machine = run({"module", "load", "m", file, "--json"}, daemon.socket_path());
    CHECK(machine.rc == 0);
    CHECK(json::parse(machine.out) == json{{"module", MODULE}});
}

TEST_CASE("module load recognizes fatbin files by extension and magic", "[cli][module]") {
    FakeDaemon daemon(modules_ok);
    const std::string fatbin = std::string("\x50\xed\x55\xba\x01\x00", 6);
    const std::string named = write_file(daemon.dir(), "k.fatbin", "x");
    const std::string sniffed = write_file(daemon.dir(), "k.bin", fatbin);
    REQUIRE(run({"module", "load", "m", named}, daemon.socket_path()).rc == 0);
    REQUIRE(run({"module", "load", "m", sniffed}, daemon.socket_path()).rc == 0);
    REQUIRE(run({"module", "load", "m", sniffed, "--format", "fatbin"}, daemon.socket_path()).rc == 0);
    const auto requests = daemon.requests();
    REQUIRE(requests.size() == 3);
    CHECK(requests[0]["format"] == "fatbin");
    CHECK(requests[1]["format"] == "fatbin");
    CHECK(requests[1]["data"] == base64_encode(fatbin));
    CHECK(requests[2]["format"] == "fatbin");
}

TEST_CASE("module load names the file in a refusal and the frame limit when the daemon refuses the frame",
          "[cli][module]") {
    FakeDaemon refusing([](const json&) {
        return error("BAD_REQUEST", "module m: the image is neither PTX (...) nor a cubin/fatbin (...)");
    });
    const std::string file = write_file(refusing.dir(), "k.ptx", "junk");
    CliRun r = run({"module", "load", "m", file}, refusing.socket_path());
    CHECK(r.rc == 1);
    CHECK(r.err == "canopy: BAD_REQUEST: FILE \"" + file +
                       "\": module m: the image is neither PTX (...) nor a "
                       "cubin/fatbin (...)\n");

    FakeDaemon small_frames([](const json&) {
        return error("BAD_REQUEST", "frame length 2000000 is outside 2..1048576; closing the connection");
    });
    const std::string big = write_file(small_frames.dir(), "big.ptx", ".version 8.0\n.target sm_90\n");
    r = run({"module", "load", "m", big}, small_frames.socket_path());
    CHECK(r.rc == 1);
    CHECK_THAT(r.err, Catch::StartsWith("canopy: BAD_REQUEST: module m: FILE \"" + big + "\" makes a request of "));
    CHECK_THAT(r.err, Catch::Contains("over canopyd's frame limit (frame length 2000000 is outside 2..1048576"));
    CHECK_THAT(r.err, Catch::Contains("raise control.max_frame_bytes"));

    FakeDaemon no_chip([](const json&) { return error("NO_CONSUMER", "module m: no live cuda chip"); });
    r = run({"module", "load", "m", big}, no_chip.socket_path());
    CHECK(r.rc == 1);
    CHECK(r.err == "canopy: NO_CONSUMER: module m: no live cuda chip\n");
}

TEST_CASE("module list prints one line per module, or the reply under --json", "[cli][module]") {
    CHECK(only_request(modules_ok, {"module", "list"}) == json{{"op", "module.list"}, {"id", 1}});
    FakeDaemon daemon(modules_ok);
    const CliRun human = run({"module", "list"}, daemon.socket_path());
    CHECK(human.rc == 0);
    CHECK(human.out == "module m (ptx, 120 bytes) on /chip0, /node0/chip1\n");
    FakeDaemon none([](const json&) { return ok({{"modules", json::array()}}); });
    CHECK(run({"module", "list"}, none.socket_path()).out == "no modules loaded\n");
}

TEST_CASE("module list shows control characters in a module's name and chips as escapes", "[cli][module]") {
    const json odd = {{"name", "m\x1b[2J"}, {"bytes", 8}, {"format", "ptx"}, {"chips", {"/chip0\n/chip1"}}};
    FakeDaemon daemon([&](const json&) { return ok({{"modules", {odd}}}); });
    const CliRun human = run({"module", "list"}, daemon.socket_path());
    CHECK(human.rc == 0);
    CHECK(human.out == "module m\\x1b[2J (ptx, 8 bytes) on /chip0\\n/chip1\n");
    const CliRun machine = run({"module", "list", "--json"}, daemon.socket_path());
    CHECK(json::parse(machine.out) == json{{"modules", {odd}}});
}

TEST_CASE("submit --param orders the arguments by parameter and sends params and launch", "[cli][module]") {
    const json r =
        only_request(modules_ok, {"submit",  "m:f",      "--on",      "chip0",    "--scalar", "float32:2", "--in",
                                  SPEC,      "--scalar", "int64:256", "--out",    SPEC,       "--param",   "float32",
                                  "--param", "tensor",   "--param",   "tensor",   "--param",  "int64",     "--grid",
                                  "4",       "--block",  "16,8",      "--shared", "1K"});
    const json& task = r["task"];
    CHECK(task["params"] == json{"float32", "tensor", "tensor", "int64"});
    REQUIRE(task["args"].size() == 4);
    CHECK(task["args"][0]["scalar"] == json{{"float32", 2.0}});
    CHECK(task["args"][1]["tag"] == "input");
    CHECK(task["args"][2]["tag"] == "output");
    CHECK(task["args"][3]["scalar"] == json{{"int64", 256}});
    CHECK(task["launch"] == json{{"grid", {4}}, {"block", {16, 8}}, {"shared_bytes", 1024}});
    // Without --param nothing changes: tensors, then scalars, no params, no launch.
    const json plain =
        only_request(modules_ok, {"submit", "fill", "--on", "chip0", "--out", SPEC, "--scalar", "float32:1"});
    CHECK_FALSE(plain["task"].contains("params"));
    CHECK_FALSE(plain["task"].contains("launch"));
}

TEST_CASE("submit refuses --param lists that do not match the arguments and bad shapes, before connecting",
          "[cli][module]") {
    const std::string nowhere = "/nonexistent/never/connected.sock";
    CliRun r = run({"submit", "m:f", "--on", "chip0", "--in", SPEC, "--param", "tensor", "--param", "tensor"}, nowhere);
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Catch::Contains("--param: 2 tensor parameters but only 1 tensor options"));
    r = run({"submit", "m:f", "--on", "chip0", "--in", SPEC, "--scalar", "int64:1", "--param", "tensor"}, nowhere);
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Catch::Contains("--param: 1 parameters for 1 tensors and 1 scalars"));
    r = run({"submit", "m:f", "--on", "chip0", "--param", "half"}, nowhere);
    CHECK(r.rc == 2);
    r = run({"submit", "m:f", "--on", "chip0", "--grid", "0"}, nowhere);
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Catch::Contains("--grid \"0\": expected X[,Y[,Z]], positive integers"));
    r = run({"submit", "m:f", "--on", "chip0", "--block", "1,2,3,4"}, nowhere);
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Catch::Contains("--block \"1,2,3,4\": at most 3 dimensions"));
}
