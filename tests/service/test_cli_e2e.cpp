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

TEST_CASE("canopyd and canopy print the same version and wire ABI, and canopyd's usage errors exit 2", "[service]") {
    const Output daemon = run_program(CANOPYD_PATH, {"--version"});
    const Output client = run_program(CANOPY_PATH, {"--version"});
    REQUIRE(daemon.rc == 0);
    REQUIRE(client.rc == 0);
    REQUIRE_THAT(daemon.out, Catch::StartsWith("canopyd "));
    REQUIRE_THAT(client.out, Catch::StartsWith("canopy "));
    CHECK(daemon.out.substr(std::string("canopyd").size()) == client.out.substr(std::string("canopy").size()));
    CHECK_THAT(daemon.out, Catch::Contains("wire ABI: task args v"));
    for (const auto& args : {std::vector<std::string>{"--bogus"}, std::vector<std::string>{"--config"},
                             std::vector<std::string>{"extra-word"}}) {
        INFO(args.front());
        const Output bad = run_program(CANOPYD_PATH, args);
        CHECK(bad.rc == 2);
        CHECK_THAT(bad.err, Catch::StartsWith("canopyd: usage: "));
    }
}

TEST_CASE("global options go before the command against a real daemon", "[service]") {
    Daemon d(e2e_config(1, 0));
    const Output r = run_program(CANOPY_PATH, {"--socket", d.socket(), "--json", "status"});
    REQUIRE(r.rc == 0);
    CHECK(r.json().at("workers").size() == 1);
    const Output q = run_program(CANOPY_PATH, {"-q", "--socket", d.socket(), "submit", "sleep_ms", "--on", "chip0",
                                               "--scalar", "int64:0", "--wait"});
    REQUIRE(q.rc == 0);
    CHECK(q.out.find_first_not_of("0123456789") == q.out.size() - 1); // one id and a newline
    CHECK(d.stop() == 0);
}

TEST_CASE("a buffer.read that stops at 512 KiB says how many bytes are left", "[service]") {
    Daemon d(e2e_config(1, 0));
    const std::string id = d.create_buffer(std::uint64_t{1} << 20);
    RawClient c(d.socket());
    json reply = c.request({{"op", "buffer.read"}, {"buffer", id}});
    REQUIRE(reply.at("ok") == true);
    CHECK(reply.at("data").get<std::string>().size() == 4 * ((524288 + 2) / 3)); // base64 of 512 KiB
    CHECK(reply.at("rest") == 524288);
    reply = c.request({{"op", "buffer.read"}, {"buffer", id}, {"offset", 524288}});
    CHECK(reply.at("rest") == 0);
    reply = c.request({{"op", "buffer.read"}, {"buffer", id}, {"offset", 1000}, {"bytes", 24}});
    CHECK(reply.at("rest") == (std::uint64_t{1} << 20) - 1024);
    reply = c.request({{"op", "buffer.read"}, {"buffer", id}, {"offset", std::uint64_t{1} << 20}});
    CHECK(reply.at("data") == "");
    CHECK(reply.at("rest") == 0);
}
