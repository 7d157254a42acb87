// User modules on remote hosts: a module load on the L4 reaches each attached host, which loads it into its own
// cuda chips; a host without one loads nothing; a host that comes back gets every module again. Without a GPU
// the forwarding is seen through the refusal and the node's log; with one, a module kernel runs on a remote
// host's cuda chip before and after the host restarts.
#include "tests/cuda/user_module.h"
#include "tests/remote/remote_fixture.h"
#include "tests/skip.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>

using namespace canopy::e2e;
using nlohmann::json;

namespace {

const std::string PTX = ".version 8.0\n.target sm_90\n.address_size 64\n.visible .entry empty()\n{\n\tret;\n}\n";

std::string float_bytes(const std::vector<float>& values) {
    std::string out(values.size() * sizeof(float), '\0');
    std::memcpy(out.data(), values.data(), out.size());
    return out;
}

// saxpy(y, x, a, n) of tests/cuda/user_module.cu on `on`, y = a * x + y over n floats.
json saxpy(const Daemon& d, const std::string& on, const std::string& y, const std::string& x, std::size_t n) {
    const std::string N = std::to_string(n);
    return d.cli_json({"submit", "um:saxpy", "--on", on, "--inout", y + ":float32:" + N, "--in", x + ":float32:" + N,
                       "--scalar", "float32:2", "--scalar", "int64:" + N, "--param", "tensor", "--param", "tensor",
                       "--param", "float32", "--param", "int64", "--grid", std::to_string((n + 255) / 256), "--block",
                       "256", "--wait"});
}

// Makes x and y on hb through the L4, runs saxpy on hb/chip0 and checks y read back through the L4.
void check_saxpy_on_hb(const Daemon& rack) {
    constexpr std::size_t n = 1000;
    std::vector<float> x(n), y(n);
    for (std::size_t i = 0; i < n; ++i) {
        x[i] = static_cast<float>(i);
        y[i] = 1.0f;
    }
    const std::string bytes = std::to_string(n * sizeof(float));
    const std::string xb = rack.cli_json({"buffer", "create", "--bytes", bytes, "--on", "hb"}).at("id");
    const std::string yb = rack.cli_json({"buffer", "create", "--bytes", bytes, "--on", "hb"}).at("id");
    write_file(rack.dir(), "x.bin", float_bytes(x));
    write_file(rack.dir(), "y.bin", float_bytes(y));
    REQUIRE(rack.cli({"buffer", "write", xb, "--from", (rack.dir() / "x.bin").string()}).rc == 0);
    REQUIRE(rack.cli({"buffer", "write", yb, "--from", (rack.dir() / "y.bin").string()}).rc == 0);
    const json done = saxpy(rack, "hb/chip0", yb, xb, n);
    INFO(done.dump());
    REQUIRE(done.at("state") == "completed");
    const auto out = rack.dir() / "y-out.bin";
    REQUIRE(rack.cli({"buffer", "read", yb, "--to", out.string()}).rc == 0);
    const std::string got = read_file(out.string());
    REQUIRE(got.size() == n * sizeof(float));
    std::vector<float> result(n);
    std::memcpy(result.data(), got.data(), got.size());
    for (std::size_t i = 0; i < n; ++i) {
        INFO("y[" << i << "]");
        REQUIRE(result[i] == 2.0f * x[i] + 1.0f);
    }
}

} // namespace

TEST_CASE("a module load on an L4 reaches its remote host, and one without a cuda chip loads nothing",
          "[remote][module]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    TempDir files;
    const auto ptx = write_file(files.path, "k.ptx", PTX);
    const Output o = rack.cli({"module", "load", "m", ptx, "--json"});
    CHECK(o.rc == 1);
    CHECK(error_code_of(o.json()) == "NO_CONSUMER");
    CHECK(error_message_of(o.json()) == "module m: no live cuda chip under / can load a module");
    // hb was asked and had no cuda chip for it.
    CHECK(eventually_logged(hb, {"L4 session 1: module m not loaded", "no live cuda chip under /"}));
    CHECK(rack.cli_json({"module", "list"}).at("modules") == json::array());
    CHECK(hb.cli_json({"module", "list"}).at("modules") == json::array());
    CHECK(rack.cli_json({"buffer", "list"}).at("buffers") == json::array()); // the image is released
    // A module kernel for hb's sim chip is refused at submit, as on any sim chip.
    const json refused = rack.cli_json({"submit", "m:empty", "--on", "hb/chip0", "--scalar", "int64:1", "--param",
                                        "int64", "--grid", "1", "--block", "1"});
    CHECK(error_code_of(refused) == "UNKNOWN_KERNEL");
    CHECK_THAT(error_message_of(refused),
               Catch::Contains("sim chip /hb/chip0 cannot run module kernel m:empty (module kernels run on cuda chips)"));
}

TEST_CASE("a module loaded on an L4 runs on a remote host's cuda chip, and a host that comes back gets it again",
          "[remote][module][gpu]") {
    if (!std::filesystem::exists("/dev/nvidia0")) {
        CANOPY_SKIP("needs a GPU");
    }
    if (canopy::testing::user_module_ptx().empty()) {
        CANOPY_SKIP("built without the CUDA Toolkit: no PTX of tests/cuda/user_module.cu");
    }
    const std::uint16_t port = free_tcp_port();
    json hb_config = l3_config("hb", loopback(port), "insecure");
    hb_config["node"]["chips"] = json::array({{{"device", 0}, {"backend", "cuda"}}});
    auto hb = std::make_unique<Daemon>(hb_config);
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure", 3000)}));
    REQUIRE(eventually_running(rack, "/hb/chip0"));
    TempDir files;
    const std::string ptx(canopy::testing::user_module_ptx());
    const auto file = write_file(files.path, "um.ptx", ptx);
    const json loaded = rack.cli_json({"module", "load", "um", file});
    INFO(loaded.dump());
    CHECK(loaded.at("module").at("chips") == json::array({"/hb/chip0"}));
    const json on_hb = hb->cli_json({"module", "list"}).at("modules");
    REQUIRE(on_hb.size() == 1);
    CHECK(on_hb[0].at("name") == "um");
    check_saxpy_on_hb(rack);

    // hb goes away and a new canopyd takes its place: the L4 attaches it and loads um into it again.
    hb.reset();
    hb = std::make_unique<Daemon>(hb_config);
    REQUIRE(eventually_running(rack, "/hb/chip0"));
    CHECK(eventually_logged(*hb, {"L4 session 1: loaded module um"}));
    check_saxpy_on_hb(rack);
}
