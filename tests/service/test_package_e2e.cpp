// The Debian package of this build, made by cpack from the build's CPackConfig.cmake into a scratch directory
// (cmake/CanopyPackage.cmake): its files, control fields, conffile and maintainer scripts, read back with
// dpkg-deb. Installing it on a fresh system is scripts/deb-check.sh's part. A build under the sanitizers skips it
// (tests/sanitizers.h).

#include "fixture.h"
#include "helpers.h"
#include "tests/sanitizers.h"
#include "tests/skip.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <sstream>
#include <sys/stat.h>
#include <unistd.h>

using namespace canopy::e2e;
namespace fs = std::filesystem;

namespace {

bool on_path(const std::string& tool) {
    return run_program("/bin/sh", {"-c", "command -v " + tool}).rc == 0;
}

// The regular files of `dpkg-deb -c` as path (without the leading "./") to "mode owner/group".
std::map<std::string, std::string> package_files(const std::string& listing) {
    std::map<std::string, std::string> files;
    std::istringstream in(listing);
    for (std::string line; std::getline(in, line);) {
        std::istringstream fields(line);
        std::string mode, owner, size, date, time, path;
        fields >> mode >> owner >> size >> date >> time >> path;
        if (!mode.empty() && mode[0] == '-') {
            files[path.substr(2)] = mode + " " + owner;
        }
    }
    return files;
}

// The control fields of `dpkg-deb -f`; a continued field (Description) keeps only its first line.
std::map<std::string, std::string> control_fields(const std::string& text) {
    std::map<std::string, std::string> fields;
    std::istringstream in(text);
    for (std::string line; std::getline(in, line);) {
        const auto colon = line.find(": ");
        if (!line.empty() && line[0] != ' ' && colon != std::string::npos) {
            fields[line.substr(0, colon)] = line.substr(colon + 2);
        }
    }
    return fields;
}

// Every file `cmake --install` puts under the prefix /usr, and the conffile.
std::set<std::string> expected_files() {
    std::set<std::string> expected = {"usr/bin/canopyd",
                                      "usr/bin/canopy",
                                      "usr/lib/systemd/system/canopyd.service",
                                      "usr/share/man/man1/canopy.1",
                                      "usr/share/man/man8/canopyd.8",
                                      "usr/share/bash-completion/completions/canopy",
                                      "etc/canopy/canopy.json"};
    expected.insert("usr/share/doc/canopy/README.md");
    for (const auto& doc : fs::directory_iterator(fs::path(CANOPY_SOURCE_DIR) / "docs")) {
        if (doc.path().extension() == ".md") {
            expected.insert("usr/share/doc/canopy/" + doc.path().filename().string());
        }
    }
    for (const auto* dir : {"config/examples", "docs/examples"}) {
        for (const auto& example : fs::directory_iterator(fs::path(CANOPY_SOURCE_DIR) / dir)) {
            expected.insert("usr/share/doc/canopy/examples/" + example.path().filename().string());
        }
    }
    for (const auto& f : client_library_files(CANOPY_SOURCE_DIR, "usr/")) {
        expected.insert(f);
    }
    return expected;
}

} // namespace

TEST_CASE("the Debian package cpack makes holds its files, dependencies, conffile, unit and maintainer scripts",
          "[service][package]") {
    if (canopy::testing::SANITIZED) {
        CANOPY_SKIP("a packaging test: the sanitizers have no bearing on it, and the normal build runs it");
    }
    if (::access(CANOPY_CPACK, X_OK) != 0) {
        CANOPY_SKIP("cpack is not installed (" << CANOPY_CPACK << ")");
    }
    for (const auto* tool : {"dpkg-deb", "dpkg-shlibdeps"}) {
        if (!on_path(tool)) {
            CANOPY_SKIP(tool << " is not installed (Debian's dpkg-dev)");
        }
    }
    TempDir out;
    const Output made = run_program(
        CANOPY_CPACK,
        {"-G", "DEB", "--config", std::string(CANOPY_BINARY_DIR) + "/CPackConfig.cmake", "-B", out.path.string()}, {},
        std::nullopt, std::chrono::seconds(120));
    INFO(made.out << made.err);
    REQUIRE(made.rc == 0);
    // canopy_VERSION_ARCH.deb, Debian's name for it.
    std::string found;
    for (const auto& e : fs::directory_iterator(out.path)) {
        if (e.path().extension() == ".deb") {
            found = e.path().filename().string();
        }
    }
    REQUIRE_THAT(found, Catch::StartsWith("canopy_" + std::string(CANOPY_VERSION) + "_") && Catch::EndsWith(".deb"));
    const std::string package = (out.path / found).string();

    // The files, each owned by root: the binaries executable, everything else not.
    const auto files = package_files(run_program("/usr/bin/dpkg-deb", {"-c", package}).out);
    std::set<std::string> paths;
    for (const auto& [path, mode] : files) {
        paths.insert(path);
        INFO(path);
        CHECK(mode == (path.rfind("usr/bin/", 0) == 0 ? "-rwxr-xr-x root/root" : "-rw-r--r-- root/root"));
    }
    CHECK(take_config_targets(paths, "usr/") == 1);
    CHECK(paths == expected_files());

    // The control fields; Depends comes from dpkg-shlibdeps (libc6 at least) and names adduser for postinst.
    const auto fields = control_fields(run_program("/usr/bin/dpkg-deb", {"-f", package}).out);
    CHECK(fields.at("Package") == "canopy");
    CHECK(fields.at("Version") == CANOPY_VERSION);
    CHECK(fields.at("Section") == "admin");
    CHECK(fields.at("Description") == "task daemon for GPU hosts");
    CHECK_FALSE(fields.at("Maintainer").empty());
    CHECK_THAT(fields.at("Depends"), Catch::Contains("adduser") && Catch::Contains("libc6 (>="));

    // The control archive: the conffile and the maintainer scripts.
    TempDir control;
    REQUIRE(run_program("/usr/bin/dpkg-deb", {"-e", package, (control.path / "DEBIAN").string()}).rc == 0);
    const fs::path debian = control.path / "DEBIAN";
    CHECK(read_file((debian / "conffiles").string()) == "/etc/canopy/canopy.json\n");
    for (const auto* script : {"postinst", "prerm", "postrm"}) {
        INFO(script);
        struct stat st {};
        REQUIRE(::stat((debian / script).c_str(), &st) == 0);
        CHECK((st.st_mode & 0777) == 0755);
        CHECK(run_program("/bin/sh", {"-n", (debian / script).string()}).rc == 0);
    }
    const std::string postinst = read_file((debian / "postinst").string());
    CHECK_THAT(postinst, Catch::Contains("adduser --system") && Catch::Contains("--home /var/lib/canopy canopy"));
    CHECK_THAT(postinst, Catch::Contains("adduser --quiet canopy \"$group\"") && Catch::Contains("video render"));
    CHECK_THAT(postinst, Catch::Contains("deb-systemd-helper enable canopyd.service"));
    CHECK_THAT(read_file((debian / "postrm").string()), Catch::Contains("rm -rf /var/lib/canopy"));

    // The payload: stripped binaries, a unit that runs /usr/bin/canopyd as canopy, and a config it accepts.
    TempDir root;
    REQUIRE(run_program("/usr/bin/dpkg-deb", {"-x", package, root.path.string()}).rc == 0);
    const std::string canopyd = (root.path / "usr/bin/canopyd").string();
    for (const auto& binary : {canopyd, (root.path / "usr/bin/canopy").string()}) {
        const Output sections = run_program("/usr/bin/env", {"readelf", "-S", binary});
        CHECK(sections.rc == 0);
        CHECK(sections.out.find(".symtab") == std::string::npos);
    }
    const std::string unit = read_file((root.path / "usr/lib/systemd/system/canopyd.service").string());
    CHECK_THAT(unit, Catch::Contains("\nExecStart=/usr/bin/canopyd --config /etc/canopy/canopy.json\n"));
    CHECK_THAT(unit, Catch::Contains("\nExecStartPre=/usr/bin/canopyd --check-config"));
    CHECK_THAT(unit, Catch::Contains("\nUser=canopy\nGroup=canopy\nSupplementaryGroups=video\n"));
    CHECK_THAT(unit, Catch::Contains("\nDocumentation=file:///usr/share/doc/canopy/README.md\n"));
    CHECK(unit.find("/usr/local") == std::string::npos);
    const Output checked =
        run_program(canopyd, {"--check-config", "--config", (root.path / "etc/canopy/canopy.json").string()});
    INFO(checked.out << checked.err);
    CHECK(checked.rc == 0);
    if (::access("/usr/bin/systemd-analyze", X_OK) == 0) {
        // verify checks that ExecStart's program exists: point the unit at the unpacked one.
        const auto path = root.path / "canopyd.service";
        std::ofstream(path) << std::regex_replace(unit, std::regex("/usr/bin/canopyd"), canopyd);
        const Output verified = run_program("/usr/bin/systemd-analyze", {"verify", path.string()});
        INFO(verified.out << verified.err);
        CHECK(verified.rc == 0);
    }
}
