#include "fixture.h"

#include <catch2/catch.hpp>
#include <fstream>

using namespace canopy::e2e;
using nlohmann::json;

TEST_CASE("the CLI drives a real daemon through a buffer's whole life", "[service]") {
    Daemon d(e2e_config(2, 2));
    const auto status = d.cli_json({"status"});
    REQUIRE(status.at("workers").size() == 4);
    const std::string id = d.create_buffer(4096);
    TempDir files;
    const auto in = (files.path / "in.bin").string();
    {
        std::ofstream f(in, std::ios::binary);
        for (int i = 0; i < 1024; ++i) {
            const float v = static_cast<float>(i);
            f.write(reinterpret_cast<const char*>(&v), 4);
        }
    }
    REQUIRE(d.cli({"buffer", "write", id, "--from", in}).rc == 0);
    const auto r = d.cli(
        {"submit", "scale", "--on", "chip1", "--inout", id + ":float32:1024", "--scalar", "float32:0.5", "--wait"});
    REQUIRE(r.rc == 0);
    const auto out = (files.path / "out.bin").string();
    REQUIRE(d.cli({"buffer", "read", id, "--to", out}).rc == 0);
    std::ifstream f(out, std::ios::binary);
    for (int i = 0; i < 1024; ++i) {
        float v = 0;
        f.read(reinterpret_cast<char*>(&v), 4);
        REQUIRE(v == 0.5f * static_cast<float>(i));
    }
    CHECK(d.cli({"buffer", "release", id}).rc == 0);
    CHECK(d.stop() == 0);
}
