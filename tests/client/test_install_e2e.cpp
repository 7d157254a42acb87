// The client library as a user builds against it: `cmake --install` into a scratch prefix, then a small program
// that includes the installed headers and links the installed libraries, found once with find_package(canopy) and
// once with pkg-config, and run against a daemon. A missing tool is a skipped test, and so is a build under the
// sanitizers (tests/sanitizers.h).
#include "tests/sanitizers.h"
#include "tests/service/fixture.h"
#include "tests/service/helpers.h"
#include "tests/skip.h"

#include <catch2/catch.hpp>
#include <filesystem>

using namespace canopy::e2e;
namespace fs = std::filesystem;

namespace {

// A consumer of the library: it connects to the socket given, creates a buffer, writes and reads it back, runs a
// task and prints what it saw.
constexpr const char* CONSUMER = R"(#include "client/canopy_client.h"

#include <cstring>
#include <iostream>

int main(int argc, char** argv) {
    using namespace canopy::client;
    Connection c = Connection::connect(argv[1]);
    const BufferInfo b = c.create_buffer({.bytes = 16});
    const char text[] = "installed";
    c.write(b.id, 0, std::as_bytes(std::span(text, sizeof text)));
    const auto back = c.read(b.id, 0, std::uint64_t{sizeof text});
    const TaskState t = c.submit(Task("sleep_ms", "sub0").scalar(Scalar::int64(1))).get();
    try {
        c.show_buffer("nope");
    } catch (const Error& e) {
        std::cout << canopy::error_code_name(e.code()) << "\n";
    }
    std::cout << c.status().node_name << " " << reinterpret_cast<const char*>(back.data()) << " "
              << to_string(t.status) << "\n";
    return argc == 2 ? 0 : 1;
}
)";

constexpr const char* CONSUMER_CMAKE = R"(cmake_minimum_required(VERSION 3.25)
project(consumer LANGUAGES CXX)
find_package(canopy REQUIRED)
add_executable(consumer main.cpp)
target_link_libraries(consumer PRIVATE canopy::client)
)";

bool have(const std::string& tool) {
    return run_program("/bin/sh", {"-c", "command -v " + tool}).rc == 0;
}

std::string expected_output() {
    return "UNKNOWN_BUFFER\ne2e installed completed\n";
}

} // namespace

TEST_CASE("the installed client library builds a consumer with find_package(canopy) and with pkg-config",
          "[client][install]") {
    if (canopy::testing::SANITIZED) {
        CANOPY_SKIP("a packaging test: the sanitizers have no bearing on it, and the normal build runs it");
    }
    for (const char* tool : {"cmake", CANOPY_CONSUMER_CXX, "pkg-config"}) {
        if (!have(tool)) {
            CANOPY_SKIP(tool << " is not installed");
        }
    }
    TempDir prefix;
    const Output installed =
        run_program("/usr/bin/env", {"cmake", "--install", CANOPY_BINARY_DIR, "--prefix", prefix.path.string()});
    INFO(installed.out << installed.err);
    REQUIRE(installed.rc == 0);
    for (const char* file : {"include/canopy/client/canopy_client.h", "include/canopy/client/connection.h",
                             "include/canopy/protocol/error.h", "include/canopy/ipc/unique_fd.h",
                             "lib/libcanopy_client.a", "lib/libcanopy_protocol.a", "lib/libcanopy_ipc.a",
                             "lib/cmake/canopy/canopyConfig.cmake", "lib/pkgconfig/canopy-client.pc"}) {
        CHECK(fs::exists(prefix.path / file));
    }
    CHECK_FALSE(fs::exists(prefix.path / "include/canopy/client/detail"));

    Daemon d(e2e_config(0, 1));
    TempDir project;
    write_file(project.path, "main.cpp", CONSUMER);
    write_file(project.path, "CMakeLists.txt", CONSUMER_CMAKE);

    // find_package(canopy) from the prefix.
    const fs::path build = project.path / "build";
    const Output configured = run_program("/usr/bin/env",
                                          {"cmake", "-S", project.path.string(), "-B", build.string(),
                                           "-DCMAKE_PREFIX_PATH=" + prefix.path.string(), "-DCMAKE_BUILD_TYPE=Release",
                                           std::string("-DCMAKE_CXX_COMPILER=") + CANOPY_CONSUMER_CXX},
                                          {}, std::nullopt, std::chrono::seconds(120));
    INFO(configured.out << configured.err);
    REQUIRE(configured.rc == 0);
    const Output built =
        run_program("/usr/bin/env", {"cmake", "--build", build.string()}, {}, std::nullopt, std::chrono::seconds(300));
    INFO(built.out << built.err);
    REQUIRE(built.rc == 0);
    const Output ran = run_program((build / "consumer").string(), {d.socket()});
    INFO(ran.err);
    CHECK(ran.rc == 0);
    CHECK(ran.out == expected_output());

    // pkg-config, from the .pc file where it was installed.
    const std::string pc_path = (prefix.path / "lib/pkgconfig").string();
    const Output flags = run_program("/usr/bin/env", {"pkg-config", "--cflags", "--libs", "canopy-client"},
                                     {{"PKG_CONFIG_PATH", pc_path}});
    INFO(flags.err);
    REQUIRE(flags.rc == 0);
    CHECK_THAT(flags.out, Catch::Contains("-lcanopy_client"));
    const std::string binary = (project.path / "consumer-pc").string();
    const Output compiled =
        run_program("/bin/sh",
                    {"-c", std::string(CANOPY_CONSUMER_CXX) + " -std=c++20 -o " + binary + " " +
                               (project.path / "main.cpp").string() + " $(pkg-config --cflags --libs canopy-client)"},
                    {{"PKG_CONFIG_PATH", pc_path}}, std::nullopt, std::chrono::seconds(300));
    INFO(compiled.out << compiled.err);
    REQUIRE(compiled.rc == 0);
    const Output ran_pc = run_program(binary, {d.socket()});
    CHECK(ran_pc.rc == 0);
    CHECK(ran_pc.out == expected_output());
}
