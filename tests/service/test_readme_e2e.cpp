// The README's tour, run as written against the real binaries: every command of its first two shell blocks
// succeeds, and the bytes it reads back are what its tasks computed.

#include "fixture.h"
#include "helpers.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

using namespace canopy::e2e;
using nlohmann::json;

namespace {

// The lines of the `n`-th ```sh block after the heading `heading` of README.md.
std::vector<std::string> readme_block(const std::string& heading, int n) {
    std::istringstream in(read_file(std::string(CANOPY_SOURCE_DIR) + "/README.md"));
    std::vector<std::string> lines;
    bool after_heading = false;
    bool inside = false;
    int seen = 0;
    for (std::string line; std::getline(in, line);) {
        if (!after_heading) {
            after_heading = line == heading;
            continue;
        }
        if (!inside && line == "```sh") {
            inside = ++seen == n;
            continue;
        }
        if (inside && line == "```") {
            return lines;
        }
        if (inside) {
            lines.push_back(line);
        }
    }
    FAIL("README.md has no sh block " << n << " under " << heading);
    return {};
}

// The line with the repository's binaries for build/... and private paths for the tour's /tmp ones.
std::string localize(std::string line, const std::filesystem::path& dir) {
    const auto replace = [&](const std::string& from, const std::string& to) {
        for (auto at = line.find(from); at != std::string::npos; at = line.find(from, at + to.size())) {
            line.replace(at, from.size(), to);
        }
    };
    replace("build/daemon/canopyd", CANOPYD_PATH);
    replace("build/cli/canopy", CANOPY_PATH);
    replace("/tmp/c.sock", (dir / "c.sock").string());
    replace("/tmp/canopy-state", (dir / "state").string());
    return line;
}

// Runs `lines` with bash -euo pipefail in `dir`, the repository's docs/ and config/ reachable there. After the
// line that starts canopyd in the background it waits, as a person would, until the daemon answers.
Output run_tour(const std::vector<std::string>& lines, const std::filesystem::path& dir) {
    std::filesystem::create_symlink(std::string(CANOPY_SOURCE_DIR) + "/docs", dir / "docs");
    std::filesystem::create_symlink(std::string(CANOPY_SOURCE_DIR) + "/config", dir / "config");
    std::string script = "set -euo pipefail\ncd " + dir.string() + "\n";
    for (const auto& line : lines) {
        if (line.rfind("scripts/run.sh", 0) == 0) {
            continue; // the one-command version of what follows
        }
        script += localize(line, dir) + "\n";
        if (line.find("canopyd") != std::string::npos && line.find(" &") != std::string::npos) {
            script += "for i in $(seq 200); do " + std::string(CANOPY_PATH) + " --socket " + (dir / "c.sock").string() +
                      " status >/dev/null 2>&1 && break; sleep 0.05; done\n";
        }
    }
    script += "wait\n"; // the daemon the tour shut down
    return run_program("/bin/bash", {"-c", script});
}

std::vector<float> read_floats(const std::filesystem::path& path) {
    const std::string bytes = read_file(path.string());
    std::vector<float> out(bytes.size() / 4);
    std::memcpy(out.data(), bytes.data(), out.size() * 4);
    return out;
}

} // namespace

TEST_CASE("the README tour runs as written and its graph computes the sum it describes", "[service][docs]") {
    TempDir dir;
    const Output o = run_tour(readme_block("## A tour", 1), dir.path);
    INFO(o.out << o.err);
    REQUIRE(o.rc == 0);
    CHECK_THAT(o.out, Catch::Contains("fill") && Catch::Contains("completed"));
    const auto values = read_floats(dir.path / "output.bin");
    REQUIRE(values.size() == 1024);
    CHECK(values[0] == 1.5f);
    CHECK(values[999] == 1.5f);
    CHECK(values[1000] == 1500.0f); // sum of the 1000 values init filled
    CHECK(values[1023] == 1.5f);
}

TEST_CASE("the README's device-memory commands run as written on the topology it names", "[service][docs]") {
    TempDir dir;
    const Output o = run_tour(readme_block("## A tour", 2), dir.path);
    INFO(o.out << o.err);
    CHECK(o.rc == 0);
}
