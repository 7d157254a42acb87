// User modules through the real canopyd and canopy on a machine without a GPU: every refusal of `module load`
// (bad name, empty or unrecognized image, a format that contradicts the bytes, an image over the frame limit,
// no cuda chip), module tasks on sim chips and subs, and graphs whose params or launch are wrong.
#include "fixture.h"
#include "helpers.h"

#include <catch2/catch.hpp>

using namespace canopy::e2e;
using nlohmann::json;

namespace {

const std::string PTX = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry empty()\n{\n\tret;\n}\n";

} // namespace

TEST_CASE("module load refuses bad names and images with BAD_REQUEST naming the file, then NO_CONSUMER",
          "[service][module]") {
    Daemon d(e2e_config(2, 1));
    TempDir files;
    const auto ptx = write_file(files.path, "k.ptx", PTX);
    const auto empty = write_file(files.path, "empty.ptx", "");
    const auto junk = write_file(files.path, "junk.bin", "plain bytes");
    struct Row {
        std::vector<std::string> args;
        std::string code;
        std::string message;
    };
    const std::vector<Row> rows = {
        {{"module", "load", "my-mod", ptx}, "BAD_REQUEST", "module name 'my-mod': must match [A-Za-z_][A-Za-z0-9_]"},
        {{"module", "load", "m", empty}, "BAD_REQUEST", "FILE \"" + empty + "\": module m: the image is empty"},
        {{"module", "load", "m", junk, "--format", "cubin"},
         "BAD_REQUEST",
         "FILE \"" + junk + "\": module m: the image is neither PTX"},
        {{"module", "load", "m", ptx, "--format", "cubin"}, "BAD_REQUEST", "format says cubin but the image is ptx"},
        {{"module", "load", "m", ptx}, "NO_CONSUMER", "module m: no live cuda chip under / can load a module"},
    };
    for (const Row& row : rows) {
        INFO("canopy " << Catch::Detail::stringify(row.args));
        const auto human = d.cli(row.args);
        INFO(human.err);
        CHECK(human.rc == 1);
        CHECK_THAT(human.err, Catch::StartsWith("canopy: " + row.code + ": "));
        CHECK_THAT(human.err, Catch::Contains(row.message));
        auto args = row.args;
        args.push_back("--json");
        const auto machine = d.cli(args);
        CHECK(machine.rc == 1);
        CHECK(error_code_of(machine.json()) == row.code);
    }
    const json list = d.cli_json({"module", "list"});
    CHECK(list.at("modules") == json::array());
    CHECK(d.cli_json({"buffer", "list"}).at("buffers") == json::array()); // nothing staged
}

TEST_CASE("an image over the control frame limit fails in the CLI naming the limit and control.max_frame_bytes",
          "[service][module]") {
    Daemon d(e2e_config(1, 0));
    TempDir files;
    // 900 KiB of PTX: about 1.2 MB of base64, over the default 1 MiB frame.
    std::string big = PTX;
    while (big.size() < 900 * 1024) {
        big += "// padding padding padding padding padding padding padding padding padding padding\n";
    }
    const auto file = write_file(files.path, "big.ptx", big);
    const auto o = d.cli({"module", "load", "big", file});
    INFO(o.err);
    CHECK(o.rc == 1);
    CHECK_THAT(o.err, Catch::StartsWith("canopy: BAD_REQUEST: module big: FILE \"" + file + "\" makes a request of "));
    CHECK_THAT(o.err, Catch::Contains("outside 2..1048576"));
    CHECK_THAT(o.err, Catch::Contains("control.max_frame_bytes"));
    CHECK(d.cli({"status"}).rc == 0); // the daemon serves on
}

TEST_CASE("module tasks on sim chips and subs are UNKNOWN_KERNEL and bad params or launch are BAD_REQUEST",
          "[service][module]") {
    Daemon d(e2e_config(1, 1));
    TempDir files;
    const std::string buf = d.create_buffer(4096);
    auto submitted = d.cli({"submit",   "m:saxpy",
                            "--on",     "chip0",
                            "--inout",  buf + ":float32:256",
                            "--in",     buf + ":float32:256::1024",
                            "--scalar", "float32:2",
                            "--scalar", "int64:256",
                            "--param",  "tensor",
                            "--param",  "tensor",
                            "--param",  "float32",
                            "--param",  "int64",
                            "--grid",   "1",
                            "--block",  "256",
                            "--json"});
    CHECK(submitted.rc == 1);
    CHECK(error_code_of(submitted.json()) == "UNKNOWN_KERNEL");
    CHECK_THAT(error_message_of(submitted.json()),
               Catch::Contains("sim chip /chip0 cannot run module kernel m:saxpy (module kernels run on cuda chips)"));

    json sub_task = task("on_sub", "m:empty", "sub0");
    sub_task["params"] = json::array();
    sub_task["launch"] = {{"grid", {1}}, {"block", {1}}};
    json mismatch = task(
        "mismatch", "m:saxpy", "chip0",
        {tensor_arg(buf, "inout", {256}), tensor_arg(buf, "input", {256}, {}, 1024), float32_arg(2), int64_arg(256)});
    mismatch["params"] = {"tensor", "int64", "float32", "int64"};
    mismatch["launch"] = {{"grid", {1}}, {"block", {256}}};
    json too_wide = mismatch;
    too_wide["name"] = "too_wide";
    too_wide["params"] = {"tensor", "tensor", "float32", "int64"};
    too_wide["launch"]["block"] = {2048};
    for (const auto& [t, code, message] : std::vector<std::tuple<json, std::string, std::string>>{
             {sub_task, "UNKNOWN_KERNEL", "sub /sub0 cannot run module kernel m:empty"},
             {mismatch, "BAD_REQUEST", "tasks[0].params[1]: expected \"tensor\" for a tensor argument, got \"int64\""},
             {too_wide, "BAD_REQUEST", "tasks[0].launch.block[0]: 2048 is above the limit of 1024"}}) {
        const auto graph =
            write_file(files.path, t.at("name").get<std::string>() + ".json", json{{"tasks", {t}}}.dump());
        const auto o = d.cli({"run", graph, "--json"});
        INFO(o.out << o.err);
        CHECK(o.rc == 1);
        const json out = o.json();
        CHECK(error_code_of(out) == code);
        CHECK_THAT(error_message_of(out), Catch::Contains(message));
    }
}
