// `cmake --install` of this build into a scratch prefix: every file a user or operator needs, where the
// install rules (cmake/CanopyInstall.cmake) say, the binaries stripped and runnable from there, the unit naming
// that prefix. Nothing lands outside the prefix: /etc/canopy/canopy.json is the Debian package's alone.

#include "fixture.h"
#include "helpers.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <set>

using namespace canopy::e2e;
namespace fs = std::filesystem;

TEST_CASE("cmake --install puts the binaries, unit, man pages, completion, docs, examples and the client library in "
          "the prefix",
          "[service][install]") {
    TempDir prefix;
    const Output o = run_program(
        "/usr/bin/env", {"cmake", "--install", CANOPY_BINARY_DIR, "--prefix", prefix.path.string(), "--strip"});
    INFO(o.out << o.err);
    REQUIRE(o.rc == 0);
    std::set<std::string> installed;
    for (const auto& e : fs::recursive_directory_iterator(prefix.path)) {
        if (e.is_regular_file()) {
            installed.insert(fs::relative(e.path(), prefix.path).string());
        }
    }
    std::set<std::string> expected = {"bin/canopyd",
                                      "bin/canopy",
                                      "lib/systemd/system/canopyd.service",
                                      "share/man/man1/canopy.1",
                                      "share/man/man8/canopyd.8",
                                      "share/bash-completion/completions/canopy"};
    expected.insert("share/doc/canopy/README.md");
    for (const auto& doc : fs::directory_iterator(fs::path(CANOPY_SOURCE_DIR) / "docs")) {
        if (doc.path().extension() == ".md") {
            expected.insert("share/doc/canopy/" + doc.path().filename().string());
        }
    }
    for (const auto* dir : {"config/examples", "docs/examples"}) {
        for (const auto& example : fs::directory_iterator(fs::path(CANOPY_SOURCE_DIR) / dir)) {
            expected.insert("share/doc/canopy/examples/" + example.path().filename().string());
        }
    }
    for (const auto& f : client_library_files(CANOPY_SOURCE_DIR, "")) {
        expected.insert(f);
    }
    CHECK(take_config_targets(installed, "") == 1);
    CHECK(installed == expected);

    // The installed binaries run, and say the same version.
    const Output daemon = run_program((prefix.path / "bin/canopyd").string(), {"--version"});
    const Output client = run_program((prefix.path / "bin/canopy").string(), {"--version"});
    CHECK(daemon.rc == 0);
    CHECK(client.rc == 0);
    CHECK(daemon.out.substr(std::string("canopyd").size()) == client.out.substr(std::string("canopy").size()));
    // Stripped: no symbol table left (a debug build of canopyd is tens of MB).
    const Output symbols = run_program("/usr/bin/env", {"readelf", "-S", (prefix.path / "bin/canopyd").string()});
    CHECK(symbols.rc == 0);
    CHECK(symbols.out.find(".symtab") == std::string::npos);
    // The unit starts the daemon from the prefix it was installed to, and points at the docs there.
    const std::string unit = read_file((prefix.path / "lib/systemd/system/canopyd.service").string());
    CHECK_THAT(unit, Catch::Contains("\nExecStart=" + (prefix.path / "bin/canopyd").string() + " --config"));
    CHECK_THAT(unit, Catch::Contains("\nExecStartPre=" + (prefix.path / "bin/canopyd").string() + " --check-config"));
    CHECK_THAT(unit,
               Catch::Contains("\nDocumentation=file://" + (prefix.path / "share/doc/canopy/README.md").string()));
    CHECK(unit.find("/usr/local") == std::string::npos);
    CHECK_THAT(unit, Catch::Contains("\nUser=canopy\n"));
}
