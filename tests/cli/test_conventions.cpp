// The conventions every command shares: global options in either position, -q, usage errors, did-you-mean,
// --version.

#include "protocol/version.h"
#include "tests/cli/fake_daemon.h"

#include <catch2/catch.hpp>

using namespace canopy::cli;
using namespace canopy::cli::testing;
using nlohmann::json;

namespace {

const json TASKS = {{{"name", "a"}, {"id", 3}, {"kernel", "fill"}, {"on", "chip0"}, {"state", "completed"}},
                    {{"name", "b"}, {"id", 4}, {"kernel", "fill"}, {"on", "chip0"}, {"state", "queued"}}};

FakeReply convention_reply(const json& request) {
    const std::string op = request.value("op", "");
    if (op == "tasks") {
        return ok({{"tasks", TASKS}});
    }
    if (op == "buffer.create" || op == "buffer.show") {
        return ok({{"buffer", SHM_BUFFER}});
    }
    if (op == "buffer.list") {
        return ok({{"buffers", json::array({SHM_BUFFER, SHM_BUFFER})}});
    }
    if (op == "submit") {
        return ok({{"task", TASKS[0]}});
    }
    return ok();
}

// run_cli with exactly `args` (no --socket appended).
CliRun plain(const std::vector<std::string>& args) {
    return run(args, "");
}

} // namespace

TEST_CASE("the options --json and --socket work before and after the command", "[cli][conventions]") {
    FakeDaemon daemon(convention_reply);
    const std::string s = daemon.socket_path();
    for (const auto& args : {std::vector<std::string>{"--json", "--socket", s, "tasks"},
                             std::vector<std::string>{"--socket", s, "tasks", "--json"},
                             std::vector<std::string>{"tasks", "--json", "--socket", s},
                             std::vector<std::string>{"--json", "tasks", "--socket", s}}) {
        INFO(args.front() << " ... " << args.back());
        const CliRun r = plain(args);
        REQUIRE(r.rc == 0);
        CHECK(json::parse(r.out) == json{{"tasks", TASKS}});
    }
}

TEST_CASE("a global option before a nested command reaches it", "[cli][conventions]") {
    FakeDaemon daemon(convention_reply);
    const CliRun r = plain({"--socket", daemon.socket_path(), "buffer", "--json", "show", "B"});
    REQUIRE(r.rc == 0);
    CHECK(json::parse(r.out) == SHM_BUFFER);
}

TEST_CASE("quiet (-q) prints only the ids of the tasks and buffers a command reports", "[cli][conventions]") {
    FakeDaemon daemon(convention_reply);
    const std::string s = daemon.socket_path();
    CHECK(plain({"-q", "--socket", s, "tasks"}).out == "3\n4\n");
    CHECK(plain({"tasks", "--quiet", "--socket", s}).out == "3\n4\n");
    CHECK(plain({"-q", "--socket", s, "buffer", "create", "--bytes", "64"}).out == "0011..ff.3.1\n");
    CHECK(plain({"-q", "--socket", s, "buffer", "list"}).out == "0011..ff.3.1\n0011..ff.3.1\n");
    CHECK(plain({"-q", "--socket", s, "submit", "fill", "--on", "chip0"}).out == "3\n");
    const CliRun release = plain({"-q", "--socket", s, "buffer", "release", "B"});
    CHECK(release.rc == 0);
    CHECK(release.out.empty());
}

TEST_CASE("the options --json and -q together are a usage error", "[cli][conventions]") {
    FakeDaemon daemon(convention_reply);
    const CliRun r = plain({"-q", "--json", "--socket", daemon.socket_path(), "tasks"});
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Catch::Contains("--json and -q exclude each other"));
    CHECK(daemon.requests().empty());
}

TEST_CASE("a misspelt command gets the closest one, an unknown one the list, and both exit 2", "[cli][conventions]") {
    CliRun r = plain(std::vector<std::string>{"stauts"});
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Catch::Contains("unknown command \"stauts\" (did you mean \"status\"?)"));
    r = plain({"buffer", "craete", "--bytes", "4"});
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Catch::Contains("unknown command \"buffer craete\" (did you mean \"buffer create\"?)"));
    r = plain(std::vector<std::string>{"frobnicate"});
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Catch::Contains("unknown command \"frobnicate\"; commands: status, worker"));
    r = plain(std::vector<std::string>{"buffer"});
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Catch::Contains("\"buffer\" needs a command: create, list, show, release, write, read"));
    r = plain({"status", "--bogus"});
    CHECK(r.rc == 2);
    CHECK_THAT(r.err, Catch::Contains("--bogus"));
}

TEST_CASE("the --version flag prints the release and the wire ABI versions", "[cli][conventions]") {
    const CliRun r = plain(std::vector<std::string>{"--version"});
    CHECK(r.rc == 0);
    CHECK(r.out == canopy::version_line("canopy") + "\n");
    CHECK_THAT(r.out, Catch::StartsWith("canopy " + std::string(canopy::canopy_version()) + " (wire ABI: task args v"));
}
