// load_config reads a file; a file it cannot read is a ConfigError naming the path and the reason.

#include "config_test_util.h"

#include <fstream>

using canopy::config::ConfigError;
using canopy::config::load_config;
using canopy::config::testing::TempDir;

namespace {

void write_file(const std::filesystem::path& path, const std::string& text) {
    std::ofstream out(path, std::ios::binary);
    out << text;
}

// The ConfigError load_config throws for `file`.
ConfigError load_error(const std::filesystem::path& file) {
    try {
        (void)load_config(file);
    } catch (const ConfigError& error) {
        return error;
    }
    FAIL("load_config accepted " << file);
    throw std::logic_error("unreachable");
}

} // namespace

TEST_CASE("load_config parses a file as parse_config parses its text", "[config]") {
    const TempDir dir;
    const std::string text = R"({"node": {"name": "from-file", "subs": 3}})";
    write_file(dir.path() / "c.json", text);
    const auto config = load_config(dir.path() / "c.json");
    CHECK(config.node.name == "from-file");
    CHECK(config == canopy::config::parse_config(text));
}

TEST_CASE("load_config names the path and strerror for a missing file", "[config]") {
    const TempDir dir;
    const auto missing = dir.path() / "missing.json";
    const ConfigError error = load_error(missing);
    CHECK(error.pointer().empty());
    CHECK_THAT(error.what(), Catch::Contains(missing.string()));
    CHECK_THAT(error.what(), Catch::Contains("No such file or directory"));
}

TEST_CASE("load_config refuses a directory", "[config]") {
    const TempDir dir;
    const ConfigError error = load_error(dir.path());
    CHECK(error.pointer().empty());
    CHECK_THAT(error.what(), Catch::Contains(dir.path().string()));
    CHECK_THAT(error.what(), Catch::Contains("Is a directory"));
}

TEST_CASE("load_config keeps the pointer of an error inside the file", "[config]") {
    const TempDir dir;
    write_file(dir.path() / "bad.json", R"({"node": {"subs": 99}})");
    const ConfigError error = load_error(dir.path() / "bad.json");
    CHECK(error.pointer() == "/node/subs");
    CHECK_THAT(error.what(), Catch::Contains("got 99"));
}
