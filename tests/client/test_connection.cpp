// The C++ client library against a real daemon: connecting, the daemon's own requests, buffers and their bytes.
// Tasks and futures are in test_tasks.cpp.
#include "client/canopy_client.h"
#include "tests/service/fixture.h"
#include "tests/service/helpers.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <cstring>
#include <thread>

using namespace canopy;
using namespace canopy::client;
using canopy::e2e::Daemon;
using canopy::e2e::e2e_config;
using canopy::e2e::pattern_bytes;

namespace {

std::vector<std::byte> bytes_of(const std::string& s) {
    std::vector<std::byte> out(s.size());
    std::memcpy(out.data(), s.data(), s.size());
    return out;
}

std::string text_of(std::span<const std::byte> b) {
    return std::string(reinterpret_cast<const char*>(b.data()), b.size());
}

// Runs `fn` and returns the Error it throws; fails the test when it throws none.
template <class Fn>
Error error_of(Fn&& fn) {
    try {
        fn();
    } catch (const Error& e) {
        return e;
    }
    FAIL("no Error was thrown");
    return Error(ErrorCode::OK, "");
}

} // namespace

TEST_CASE("connect names the path and the errno when nothing listens, and refuses a path too long for a socket",
          "[client]") {
    try {
        Connection::connect("/nonexistent/canopy.sock");
        FAIL("connected");
    } catch (const ConnectError& e) {
        CHECK(e.path() == "/nonexistent/canopy.sock");
        CHECK(e.err() == ENOENT);
        CHECK(std::string(e.what()) == "cannot connect to /nonexistent/canopy.sock: No such file or directory");
    }
    CHECK_THROWS_WITH(Connection::connect("/tmp/" + std::string(200, 'x')),
                      "a socket path has 1 to 107 bytes, not 205");
    CHECK_THROWS_AS(Connection::connect(""), std::invalid_argument);
}

TEST_CASE("the default socket is $CANOPY_SOCKET, else /run/canopy/canopy.sock", "[client]") {
    ::setenv("CANOPY_SOCKET", "/tmp/elsewhere.sock", 1);
    CHECK(default_socket_path() == "/tmp/elsewhere.sock");
    ::setenv("CANOPY_SOCKET", "", 1);
    CHECK(default_socket_path() == "/run/canopy/canopy.sock");
    ::unsetenv("CANOPY_SOCKET");
    CHECK(default_socket_path() == "/run/canopy/canopy.sock");
    Daemon d(e2e_config(0, 1));
    ::setenv("CANOPY_SOCKET", d.socket().c_str(), 1);
    CHECK(Connection::connect().socket_path() == d.socket());
    ::unsetenv("CANOPY_SOCKET");
}

TEST_CASE("status lists the worker tree, restart_worker restarts one, metrics and request reach the daemon",
          "[client]") {
    Daemon d(e2e_config(1, 1));
    Connection c = Connection::connect(d.socket());
    const Status s = c.status();
    CHECK(s.node_name == "e2e");
    CHECK(s.level == 3);
    CHECK(s.pid == d.pid());
    REQUIRE(s.workers.size() == 2);
    CHECK(s.workers[0].path == "/chip0");
    CHECK(s.workers[0].kind == "chip");
    CHECK(s.workers[0].backend == "sim");
    CHECK(s.workers[1].path == "/sub0");
    CHECK(s.all_running());
    CHECK(s.json.at("workers").size() == 2);

    const std::int64_t old_pid = s.workers[1].pid;
    c.restart_worker("sub0");
    Status after = c.status();
    for (int i = 0; i < 500 && !(after.all_running() && after.workers[1].pid != old_pid); ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
        after = c.status();
    }
    CHECK(after.workers[1].pid != old_pid);
    CHECK(after.workers[1].restarts == 1);
    const Error unknown = error_of([&] { c.restart_worker("sub9"); });
    CHECK(unknown.code() == ErrorCode::UNKNOWN_WORKER);
    CHECK(unknown.code_name() == "UNKNOWN_WORKER");

    CHECK_THAT(c.metrics(), Catch::Contains("canopy_"));
    const Error bad_op = error_of([&] { c.request({{"op", "nope"}}); });
    CHECK(bad_op.code() == ErrorCode::BAD_REQUEST);
    CHECK(std::string(bad_op.what()) == "unknown op \"nope\"");
    CHECK(c.request({{"op", "buffer.list"}}).contains("buffers")); // the connection is still usable
}

TEST_CASE("buffers are created, listed, shown and released, and refusals are Errors with the daemon's words",
          "[client]") {
    Daemon d(e2e_config(2, 1));
    Connection c = Connection::connect(d.socket());
    const BufferInfo shm = c.create_buffer({.bytes = 4096, .access = "r"});
    CHECK(shm.backend == "posix_shm");
    CHECK(shm.nbytes == 4096);
    CHECK(shm.access == "r");
    CHECK(shm.owner_uid == ::getuid());
    const BufferInfo sym = c.create_buffer({.bytes = 1024, .backend = "symmetric", .world = {"chip1", "chip0"}});
    CHECK(sym.backend == "sim_vmm");
    CHECK(sym.world == std::vector<std::string>{"/chip1", "/chip0"});
    const auto listed = c.list_buffers();
    REQUIRE(listed.size() == 2);
    CHECK(listed[0].id == shm.id);
    CHECK(c.show_buffer(sym.id).nbytes == 1024);
    CHECK(c.release_buffer(shm.id) == std::nullopt);

    const Error stale = error_of([&] { c.show_buffer(shm.id); });
    CHECK(stale.code() == ErrorCode::STALE_BUFFER);
    CHECK(std::string(stale.what()) == "buffer: buffer " + shm.id + " was released");
    const Error unknown = error_of([&] { c.release_buffer("nope"); });
    CHECK(unknown.code() == ErrorCode::UNKNOWN_BUFFER);
    const Error zero = error_of([&] { c.create_buffer({.bytes = 0}); });
    CHECK(zero.code() == ErrorCode::BAD_REQUEST);
    const Error no_chip = error_of([&] { c.create_buffer({.bytes = 64, .backend = "vmm"}); });
    CHECK(std::string(no_chip.what()) == "a vmm buffer needs --on CHIP");
}

TEST_CASE("write and read move a whole buffer's bytes as attachments, one request each", "[client]") {
    Daemon d(e2e_config(1, 1));
    Connection c = Connection::connect(d.socket());
    constexpr std::size_t SIZE = 8u << 20;
    const BufferInfo b = c.create_buffer({.bytes = SIZE});
    const std::string content = pattern_bytes(SIZE, 21);
    c.write(b.id, 0, bytes_of(content));
    CHECK(text_of(c.read(b.id)) == content);
    // Into a caller's span: exact, then cut short at the end of the buffer.
    std::vector<std::byte> into(100);
    const ReadResult middle = c.read(b.id, 1000, into);
    CHECK(middle.bytes == 100);
    CHECK(middle.rest == SIZE - 1100);
    CHECK_FALSE(middle.cut_short);
    CHECK(text_of(into) == content.substr(1000, 100));
    const ReadResult tail = c.read(b.id, SIZE - 40, into);
    CHECK(tail.bytes == 40);
    CHECK(tail.rest == 0);
    CHECK(tail.cut_short);
    CHECK(text_of(std::span(into).first(40)) == content.substr(SIZE - 40));
    CHECK(c.read(b.id, SIZE - 10, std::uint64_t{5}).size() == 5);
    // A sim_vmm buffer the same way.
    const BufferInfo vmm = c.create_buffer({.bytes = 65536, .backend = "vmm", .on = "chip0"});
    c.write(vmm.id, 3, bytes_of("canopy"));
    CHECK(text_of(c.read(vmm.id, 3, std::uint64_t{6})) == "canopy");
    // Refusals leave the connection usable.
    const Error past = error_of([&] { c.write(b.id, SIZE - 1, bytes_of("ab")); });
    CHECK(past.code() == ErrorCode::BAD_REQUEST);
    CHECK(std::string(past.what()) == "writing 2 bytes at offset 8388607 runs past the end of the 8388608-byte buffer");
    const Error offset = error_of([&] { c.read(b.id, SIZE + 1); });
    CHECK(std::string(offset.what()) == "offset 8388609 is past the end of the 8388608-byte buffer");
    const Error unknown = error_of([&] { c.write("nope", 0, bytes_of(content.substr(0, 1000))); });
    CHECK(unknown.code() == ErrorCode::UNKNOWN_BUFFER);
    CHECK(text_of(c.read(b.id, 0, std::uint64_t{16})) == content.substr(0, 16));
}

TEST_CASE("a write over control.max_attachment_bytes is an Error, and the daemon closes the connection", "[client]") {
    Daemon d(e2e_config(0, 1, {{"control", {{"max_attachment_bytes", 1024}}}}));
    Connection c = Connection::connect(d.socket());
    const BufferInfo b = c.create_buffer({.bytes = 4096});
    c.write(b.id, 0, bytes_of(std::string(1024, 'a')));
    const Error over = error_of([&] { c.write(b.id, 0, bytes_of(std::string(4096, 'b'))); });
    CHECK(over.code() == ErrorCode::BAD_REQUEST);
    CHECK(std::string(over.what()) ==
          "attachment of 4096 bytes exceeds control.max_attachment_bytes (1024); closing the connection");
    CHECK_THROWS_AS(c.status(), ProtocolError);
    Connection again = Connection::connect(d.socket());
    CHECK(text_of(again.read(b.id, 0, std::uint64_t{4})) == "aaaa");
}

TEST_CASE("a mapping shows a buffer's bytes both ways, and a read-only one gives only const bytes", "[client]") {
    Daemon d(e2e_config(2, 1, {{"preload", {{{"name", "scratch"}, {"backend", "fork_shm"}, {"bytes", 4096}}}}}));
    Connection c = Connection::connect(d.socket());
    const BufferInfo b = c.create_buffer({.bytes = 4096});
    {
        BufferMapping m = c.map(b.id);
        CHECK(m.writable());
        CHECK(m.ranks() == 1);
        CHECK(m.size() == 4096);
        CHECK(m.buffer().id == b.id);
        auto floats = m.as<float>();
        REQUIRE(floats.size() == 1024);
        floats[7] = 1.5f;
        BufferMapping moved = std::move(m);
        CHECK(moved.cas<float>()[7] == 1.5f);
    }
    const auto bytes = c.read(b.id, 28, std::uint64_t{4});
    float seen = 0;
    std::memcpy(&seen, bytes.data(), 4);
    CHECK(seen == 1.5f);
    // A task's result shows in a mapping made after it was submitted.
    c.submit(Task("fill", "sub0").output(View(b.id, "float32", {1024})).scalar(Scalar::float32(2.5f)));
    BufferMapping ro = c.map(b.id, MapAccess::READ);
    CHECK_FALSE(ro.writable());
    CHECK(ro.cas<float>()[1023] == 2.5f);
    CHECK_THROWS_WITH(ro.bytes(), "buffer " + b.id + " is mapped read-only; use cbytes()");
    CHECK_THROWS_AS(ro.cbytes(1), std::out_of_range);
    // One region per rank of a symmetric buffer.
    const BufferInfo sym = c.create_buffer({.bytes = 4096, .backend = "symmetric", .world = {"chip0", "chip1"}});
    const BufferMapping both = c.map(sym.id);
    CHECK(both.ranks() == 2);
    CHECK(both.cbytes(1).size() == 4096);
    // A preloaded arena has no fd.
    const Error arena = error_of([&] { c.map("scratch"); });
    CHECK(arena.code() == ErrorCode::BAD_REQUEST);
    CHECK(std::string(arena.what()) ==
          "buffer.fd: preloaded arena 'scratch' has no file descriptor; tasks reach it by its name");
    const BufferFds fds = c.buffer_fds(b.id, MapAccess::READ);
    CHECK(fds.fds.size() == 1);
    CHECK_FALSE(fds.writable);
    CHECK(fds.buffer.backend == "posix_shm");
}

TEST_CASE("module calls carry the daemon's refusals, and shutdown stops the daemon", "[client]") {
    Daemon d(e2e_config(1, 0));
    Connection c = Connection::connect(d.socket());
    CHECK(c.modules().empty());
    const Error junk = error_of([&] { c.load_module("mine", bytes_of("junk"), "ptx"); });
    CHECK(junk.code() == ErrorCode::BAD_REQUEST);
    const Error no_chip = error_of([&] { c.load_module("mine", bytes_of(".version 8.0\n.target sm_90\n")); });
    CHECK(no_chip.code() == ErrorCode::NO_CONSUMER);
    c.shutdown();
    CHECK(d.wait_exit(std::chrono::milliseconds(20000)) == 0);
}
