// Failed requests, an unreachable daemon and malformed replies.

#include "tests/cli/fake_daemon.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

using namespace canopy::cli;
using namespace canopy::cli::testing;
using nlohmann::json;

namespace {

// A frame header announcing `n` bytes.
std::string header(std::uint32_t n) {
    return frame_header(n);
}

CliRun against(FakeReply reply, std::vector<std::string> args = {"status"}) {
    FakeDaemon daemon([reply](const json&) { return reply; });
    return run(std::move(args), daemon.socket_path());
}

} // namespace

TEST_CASE("an error reply exits 1 with canopy: CODE: message", "[cli]") {
    const CliRun r = against(error("UNKNOWN_BUFFER", "buffer 0011..ff.9.1: no such buffer"), {"buffer", "show", "x"});
    CHECK(r.rc == 1);
    CHECK(r.err == "canopy: UNKNOWN_BUFFER: buffer 0011..ff.9.1: no such buffer\n");
    CHECK(r.out.empty());
}

TEST_CASE("an error reply under --json prints the error object on stdout", "[cli]") {
    const CliRun r = against(error("ACCESS_DENIED", "args[0]: output needs write access"),
                             {"buffer", "create", "--bytes", "1", "--json"});
    CHECK(r.rc == 1);
    CHECK(json::parse(r.out) ==
          json{{"error", {{"code", "ACCESS_DENIED"}, {"message", "args[0]: output needs write access"}}}});
    CHECK(r.err == "canopy: ACCESS_DENIED: args[0]: output needs write access\n");
}

TEST_CASE("every command turns an error reply into exit 1", "[cli]") {
    FakeDaemon daemon([](const json&) { return error("UNAUTHORIZED", "uid 1000 is not allowed"); });
    const std::string dir = daemon.dir();
    const std::string file = write_file(dir, "f.ptx", ".version 8.0");
    const std::string graph = write_file(dir, "g.json", "{\"tasks\": []}");
    for (const std::vector<std::string>& args :
         std::vector<std::vector<std::string>>{{"status"},
                                               {"buffer", "create", "--bytes", "1"},
                                               {"buffer", "list"},
                                               {"buffer", "show", "b"},
                                               {"buffer", "release", "b"},
                                               {"buffer", "write", "b", "--from", file},
                                               {"buffer", "read", "b", "--to", dir + "/o.bin"},
                                               {"submit", "k", "--on", "chip0"},
                                               {"run", graph, "--wait"},
                                               {"wait", "1"},
                                               {"tasks"},
                                               {"module", "load", "m", file},
                                               {"metrics"},
                                               {"shutdown"}}) {
        const CliRun r = run(args, daemon.socket_path());
        INFO(args[0]);
        CHECK(r.rc == 1);
        CHECK(r.err == "canopy: UNAUTHORIZED: uid 1000 is not allowed\n");
    }
}

TEST_CASE("an unreachable socket exits 3 naming the path and the errno text", "[cli]") {
    const CliRun r = run({"status"}, "/nonexistent/canopy.sock");
    CHECK(r.rc == 3);
    CHECK(r.err.find("canopy: UNREACHABLE: cannot connect to /nonexistent/canopy.sock: No such file or directory") ==
          0);
    const CliRun j = run({"tasks", "--json"}, "/nonexistent/canopy.sock");
    CHECK(j.rc == 3);
    CHECK(json::parse(j.out)["error"]["code"] == "UNREACHABLE");
}

TEST_CASE("a socket file nobody listens on exits 3 with connection refused", "[cli]") {
    // A socket bound and closed without listen(): the file exists, connecting is refused.
    FakeDaemon other([](const json&) { return ok(); });
    const std::string stale = other.dir() + "/stale.sock";
    {
        const int fd = ::socket(AF_UNIX, SOCK_STREAM, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::memcpy(addr.sun_path, stale.c_str(), stale.size());
        REQUIRE(::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0);
        ::close(fd);
    }
    const CliRun r = run({"status"}, stale);
    CHECK(r.rc == 3);
    CHECK(r.err.find("cannot connect to " + stale + ": Connection refused") != std::string::npos);
}

TEST_CASE("a socket path longer than sockaddr_un allows is a usage error", "[cli]") {
    const CliRun r = run({"status"}, "/tmp/" + std::string(200, 'x'));
    CHECK(r.rc == 2);
    CHECK(r.err.find("--socket \"/tmp/xxx") != std::string::npos);
    CHECK(r.err.find("a socket path has 1 to 107 bytes") != std::string::npos);
}

TEST_CASE("a reply frame with a length below 2 is a protocol error", "[cli]") {
    for (std::uint32_t n : {0u, 1u}) {
        const CliRun r = against(raw(header(n) + "{", true));
        CHECK(r.rc == 1);
        CHECK(r.err == "canopy: PROTOCOL_ERROR: the reply to \"status\" has frame length " + std::to_string(n) +
                           ", outside [2, 67108864]\n");
    }
}

TEST_CASE("a reply frame with a huge length is a protocol error", "[cli]") {
    const CliRun r = against(raw(header(0x80000000u), true));
    CHECK(r.rc == 1);
    CHECK(r.err.find("frame length 2147483648, outside [2, 67108864]") != std::string::npos);
}

TEST_CASE("a reply body that is not JSON is a protocol error", "[cli]") {
    const CliRun r = against(raw(frame("not json at all")));
    CHECK(r.rc == 1);
    CHECK(r.err.find("canopy: PROTOCOL_ERROR: the reply to \"status\" is not JSON (not json at all)") == 0);
    const CliRun j = against(raw(frame("\x01\x02 binary")), {"status", "--json"});
    CHECK(j.rc == 1);
    CHECK(json::parse(j.out)["error"]["code"] == "PROTOCOL_ERROR");
}

TEST_CASE("a reply that is not an object or has no ok is a protocol error", "[cli]") {
    CHECK(against(raw(frame("[1, 2]"))).err.find("is not a JSON object") != std::string::npos);
    CHECK(against(raw(frame("{\"id\": 1}"))).err.find("has no boolean \"ok\"") != std::string::npos);
    CHECK(against(raw(frame("{\"id\": 1, \"ok\": false}"))).err.find("failure without an error code") !=
          std::string::npos);
}

TEST_CASE("a reply carrying another request's id is a protocol error", "[cli]") {
    const CliRun r = against(raw(frame("{\"id\": 9, \"ok\": true}")));
    CHECK(r.rc == 1);
    CHECK(r.err.find("carries id 9, expected 1") != std::string::npos);
}

TEST_CASE("a reply with a null id is accepted", "[cli]") {
    const CliRun r = against(raw(frame("{\"id\": null, \"ok\": false, \"error\": {\"code\": \"BAD_REQUEST\", "
                                       "\"message\": \"frame too large\"}}")));
    CHECK(r.rc == 1);
    CHECK(r.err == "canopy: BAD_REQUEST: frame too large\n");
}

TEST_CASE("a connection closed before or during a reply is a protocol error", "[cli]") {
    const CliRun none = against(raw("", true));
    CHECK(none.rc == 1);
    CHECK(none.err == "canopy: PROTOCOL_ERROR: canopyd closed the connection without replying to \"status\"\n");
    const CliRun partial = against(raw(header(100) + "{\"ok\"", true));
    CHECK(partial.rc == 1);
    CHECK(partial.err.find("closed the connection in the middle of a frame (5 of 100 bytes)") != std::string::npos);
    const CliRun split_header = against(raw(std::string("\x10\x00", 2), true));
    CHECK(split_header.err.find("in the middle of a frame (2 of 4 bytes)") != std::string::npos);
}

TEST_CASE("a reply missing the object a command prints is a protocol error", "[cli]") {
    CHECK(against(ok(), {"buffer", "show", "b"}).err ==
          "canopy: PROTOCOL_ERROR: the reply to \"buffer.show\" has no \"buffer\" object\n");
    CHECK(against(ok(), {"wait", "3"}).err == "canopy: PROTOCOL_ERROR: the reply to \"wait\" has no \"task\" object\n");
    CHECK(against(ok({{"tasks", 3}}), {"run", "/dev/null"}).rc == 2); // the graph file is checked first
}
