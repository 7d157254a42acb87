// Ownership and roles through the real binaries, with clients of several uids: a buffer belongs to the uid
// that created it, and shutdown, module loads and worker restarts are for admins.

#include "fixture.h"
#include "helpers.h"
#include "tests/skip.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <grp.h>
#include <unistd.h>

using namespace canopy::e2e;
using nlohmann::json;

namespace {

json access_config() {
    return e2e_config(1, 0, {{"control", {{"allow_uids", {OWNER_UID, OTHER_UID}}, {"admin_uids", {ADMIN_UID}}}}});
}

// The error code of a --json failure, or "" when the command succeeded.
std::string refusal(const Output& o) {
    return o.rc == 0 ? "" : error_code_of(o.json());
}

} // namespace

TEST_CASE("a buffer's bytes, release and use in tasks are its creator's and the admins'", "[service][access]") {
    if (::geteuid() != 0) {
        CANOPY_SKIP("needs root to run clients as other uids");
    }
    Daemon d(access_config());
    TempDir files;
    std::filesystem::permissions(files.path, std::filesystem::perms::all); // every uid reads and writes here
    const auto in = write_file(files.path, "in.bin", std::string(64, 'x'));
    const auto out = (files.path / "out.bin").string();

    const Output created = d.cli({"buffer", "create", "--bytes", "64", "--json"}, OWNER_UID);
    REQUIRE(created.rc == 0);
    const std::string id = created.json().at("id");
    CHECK(created.json().at("owner_uid") == OWNER_UID);
    CHECK(d.cli({"buffer", "write", id, "--from", in}, OWNER_UID).rc == 0);
    CHECK(d.cli({"buffer", "read", id, "--to", out}, OWNER_UID).rc == 0);

    // Another allowed uid may see the buffer but not touch it.
    CHECK(d.cli({"buffer", "show", id}, OTHER_UID).rc == 0);
    for (const auto& args : {std::vector<std::string>{"buffer", "read", id, "--to", out, "--json"},
                             std::vector<std::string>{"buffer", "write", id, "--from", in, "--json"},
                             std::vector<std::string>{"buffer", "release", id, "--json"},
                             std::vector<std::string>{"submit", "fill", "--on", "chip0", "--out", id + ":float32:16",
                                                      "--scalar", "float32:1", "--wait", "--json"}}) {
        INFO(args[0] << " " << args[1]);
        const Output o = d.cli(args, OTHER_UID);
        CHECK(o.rc == 1);
        CHECK(refusal(o) == "ACCESS_DENIED");
        CHECK_THAT(o.err, Catch::Contains("belongs to uid 65534; uid 65533 may not"));
    }
    CHECK_THAT(d.log(), Catch::Contains("control: refused buffer.read of uid 65533"));

    // The daemon's own uid and an admin uid may.
    CHECK(d.cli({"buffer", "read", id, "--to", out}).rc == 0);
    CHECK(d.cli({"submit", "fill", "--on", "chip0", "--out", id + ":float32:16", "--scalar", "float32:1", "--wait"},
                ADMIN_UID)
              .rc == 0);
    CHECK(d.cli({"buffer", "release", id}, ADMIN_UID).rc == 0);
    CHECK(d.stop() == 0);
}

TEST_CASE("shutdown, module load and worker restart need an admin", "[service][access]") {
    if (::geteuid() != 0) {
        CANOPY_SKIP("needs root to run clients as other uids");
    }
    Daemon d(access_config());
    TempDir files;
    std::filesystem::permissions(files.path, std::filesystem::perms::all);
    const auto ptx = write_file(files.path, "k.ptx", ".version 8.0\n.target sm_90\n");
    for (const auto& args : {std::vector<std::string>{"shutdown", "--json"},
                             std::vector<std::string>{"worker", "restart", "chip0", "--json"},
                             std::vector<std::string>{"module", "load", "m", ptx, "--json"}}) {
        INFO(args[0]);
        const Output o = d.cli(args, OWNER_UID);
        CHECK(o.rc == 1);
        CHECK(refusal(o) == "UNAUTHORIZED");
        CHECK_THAT(o.err, Catch::Contains("needs an admin: uid 65534"));
    }
    CHECK_THAT(d.log(), Catch::Contains("control: refused shutdown of uid 65534"));
    CHECK(d.cli({"status"}, OWNER_UID).rc == 0); // still serving
    const Output restarted = d.cli({"worker", "restart", "chip0"}, ADMIN_UID);
    CHECK(restarted.rc == 0);
    CHECK_THAT(d.log(), Catch::Contains("restart asked by uid 65532"));
    CHECK(d.cli({"shutdown"}, ADMIN_UID).rc == 0);
    CHECK(d.wait_exit(std::chrono::seconds(20)) == 0);
}

TEST_CASE("a daemon that runs as a service user gives root admin access", "[service][access]") {
    if (::geteuid() != 0) {
        CANOPY_SKIP("needs root to start the daemon as another uid");
    }
    // As the shipped unit runs it: its own uid, not root, with no allow list naming root.
    Daemon d(e2e_config(1, 0, {{"control", {{"allow_uids", {OTHER_UID}}}}}), {},
             [] { return ::setgroups(0, nullptr) == 0 && ::setgid(OWNER_UID) == 0 && ::setuid(OWNER_UID) == 0; });
    CHECK(d.cli({"status"}, OWNER_UID).rc == 0); // the daemon's own uid
    const Output restart = d.cli({"worker", "restart", "chip0"});
    CHECK(restart.rc == 0);
    CHECK_THAT(d.log(), Catch::Contains("restart asked by uid 0"));
    const Output refused = d.cli({"worker", "restart", "chip0", "--json"}, OTHER_UID);
    CHECK(refusal(refused) == "UNAUTHORIZED");
    CHECK(d.cli({"shutdown"}).rc == 0);
    CHECK(d.wait_exit(std::chrono::seconds(20)) == 0);
}
