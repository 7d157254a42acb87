// buffer write / buffer read as attachments against a fake daemon that holds a buffer's bytes and hands out no fd,
// and the chunking of write_buffer / read_buffer with a small chunk size.

#include "cli/transfer.h"
#include "tests/cli/fake_daemon.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <random>
#include <sstream>

using namespace canopy::cli;
using namespace canopy::cli::testing;
using nlohmann::json;

namespace {

constexpr std::size_t SMALL_CHUNK = 512 * 1024;

// A fake daemon with one buffer "B" of `nbytes` bytes, serving buffer.show, buffer.write and buffer.read with
// attachments as docs/control-protocol.md says, ranges past the end included, and refusing buffer.fd.
class BufferDaemon {
public:
    explicit BufferDaemon(std::size_t nbytes)
        : bytes_(nbytes, '\0'),
          daemon_([this](const json& r, const std::string& attachment) { return serve(r, attachment); }) {}

    FakeDaemon& daemon() { return daemon_; }
    const std::string& bytes() const { return bytes_; }
    std::string& bytes() { return bytes_; }

private:
    FakeReply serve(const json& request, const std::string& attachment) {
        const std::string op = request["op"];
        if (request.value("buffer", "") != "B") {
            return error("UNKNOWN_BUFFER", "no buffer " + request.value("buffer", ""));
        }
        const std::uint64_t offset = request.value("offset", std::uint64_t{0});
        if (op == "buffer.show") {
            return ok({{"buffer", {{"id", "B"}, {"nbytes", bytes_.size()}}}});
        }
        if (op == "buffer.fd") { // a daemon without fd hand-over: the CLI moves the bytes as attachments
            return error("BAD_REQUEST", "unknown op \"buffer.fd\"");
        }
        if (offset > bytes_.size()) {
            return error("BAD_REQUEST", "offset past the end");
        }
        if (op == "buffer.write") {
            if (offset + attachment.size() > bytes_.size()) {
                return error("BAD_REQUEST", "write past the end");
            }
            bytes_.replace(offset, attachment.size(), attachment);
            return ok({{"written", attachment.size()}});
        }
        const std::uint64_t want = request.value("bytes", bytes_.size() - offset);
        const std::uint64_t n = std::min<std::uint64_t>(want, bytes_.size() - offset);
        json reply = {{"rest", bytes_.size() - offset - n}};
        if (n < want) {
            reply["short"] = true;
        }
        return ok_with(bytes_.substr(offset, n), reply);
    }

    std::string bytes_;
    FakeDaemon daemon_;
};

std::string random_bytes(std::size_t n, unsigned seed) {
    std::mt19937 rng(seed);
    std::string bytes(n, '\0');
    for (auto& b : bytes) {
        b = static_cast<char>(rng() & 0xff);
    }
    return bytes;
}

std::vector<std::pair<std::uint64_t, std::size_t>> write_ranges(const FakeDaemon& daemon) {
    std::vector<std::pair<std::uint64_t, std::size_t>> ranges;
    for (const auto& r : daemon.requests()) {
        if (r["op"] == "buffer.write") {
            ranges.emplace_back(r["offset"], r["attachment"]);
        }
    }
    return ranges;
}

} // namespace

TEST_CASE("buffer write sends a file as one attachment at the offset", "[cli]") {
    constexpr std::size_t SIZE = 1'300'000;
    BufferDaemon buffer(2u << 20);
    const std::string content = random_bytes(SIZE, 1);
    const std::string file = write_file(buffer.daemon().dir(), "in.bin", content);
    const CliRun r =
        run({"buffer", "write", "B", "--from", file, "--offset", "100", "--json"}, buffer.daemon().socket_path());
    REQUIRE(r.rc == 0);
    CHECK(write_ranges(buffer.daemon()) == std::vector<std::pair<std::uint64_t, std::size_t>>{{100, SIZE}});
    CHECK(buffer.bytes().substr(100, SIZE) == content);
    CHECK(json::parse(r.out) == json{{"buffer", "B"}, {"offset", 100}, {"written", SIZE}, {"requests", 1}});
}

TEST_CASE("write_buffer splits a stream into chunks of the size given, at increasing offsets", "[cli]") {
    constexpr std::size_t SIZE = 1'300'000;
    BufferDaemon buffer(2u << 20);
    const std::string content = random_bytes(SIZE, 1);
    auto connection = canopy::client::Connection::connect(buffer.daemon().socket_path());
    std::istringstream in(content);
    const TransferResult done = write_buffer(connection, "B", in, 100, SMALL_CHUNK);
    CHECK(done.bytes == SIZE);
    CHECK(done.requests == 3);
    CHECK(write_ranges(buffer.daemon()) ==
          std::vector<std::pair<std::uint64_t, std::size_t>>{{100, 524288}, {524388, 524288}, {1048676, 251424}});
    CHECK(buffer.bytes().substr(100, SIZE) == content);
    // An exact multiple of the chunk sends no empty tail.
    std::istringstream exact(random_bytes(2 * SMALL_CHUNK, 2));
    CHECK(write_buffer(connection, "B", exact, 0, SMALL_CHUNK).requests == 2);
}

TEST_CASE("buffer write of an empty file sends one empty write", "[cli]") {
    BufferDaemon buffer(16);
    const std::string file = write_file(buffer.daemon().dir(), "empty.bin", "");
    const CliRun r = run({"buffer", "write", "B", "--from", file, "--json"}, buffer.daemon().socket_path());
    REQUIRE(r.rc == 0);
    CHECK(write_ranges(buffer.daemon()) == std::vector<std::pair<std::uint64_t, std::size_t>>{{0, 0}});
    CHECK(buffer.daemon().attachments() == std::vector<std::string>{""});
    CHECK(json::parse(r.out) == json{{"buffer", "B"}, {"offset", 0}, {"written", 0}, {"requests", 1}});
}

TEST_CASE("buffer read takes a buffer byte for byte as one attachment, and read_buffer in chunks", "[cli]") {
    constexpr std::size_t SIZE = (1u << 20) + 12345;
    BufferDaemon buffer(SIZE);
    buffer.bytes() = random_bytes(SIZE, 3);
    const std::string file = buffer.daemon().dir() + "/out.bin";
    const CliRun r = run({"buffer", "read", "B", "--to", file}, buffer.daemon().socket_path());
    REQUIRE(r.rc == 0);
    CHECK(read_whole_file(file) == buffer.bytes());
    const auto requests = buffer.daemon().requests();
    REQUIRE(requests.size() == 3);
    CHECK(requests[0] == json{{"op", "buffer.show"}, {"buffer", "B"}, {"id", 1}});
    CHECK(requests[1] == json{{"op", "buffer.fd"}, {"buffer", "B"}, {"access", "read"}, {"id", 2}});
    CHECK(
        requests[2] ==
        json{{"op", "buffer.read"}, {"buffer", "B"}, {"offset", 0}, {"bytes", SIZE}, {"attachment", true}, {"id", 3}});
    CHECK(r.out == "read " + std::to_string(SIZE) + " bytes of B at offset 0 into " + file + "\n");

    auto connection = canopy::client::Connection::connect(buffer.daemon().socket_path());
    std::ostringstream out;
    const TransferResult done = read_buffer(connection, "B", out, 0, SIZE, SMALL_CHUNK);
    CHECK(done.requests == 3);
    CHECK(out.str() == buffer.bytes());
    const auto chunked = buffer.daemon().requests();
    REQUIRE(chunked.size() == 7);
    CHECK(chunked[4].at("offset") == 0);
    CHECK(chunked[5].at("offset") == 524288);
    CHECK(chunked[6].at("bytes") == 12345);
}

TEST_CASE("buffer write then read round-trips a file exactly", "[cli]") {
    constexpr std::size_t SIZE = 1'500'001;
    BufferDaemon buffer(SIZE + 7);
    const std::string content = random_bytes(SIZE, 4);
    const std::string in = write_file(buffer.daemon().dir(), "in.bin", content);
    const std::string out = buffer.daemon().dir() + "/out.bin";
    REQUIRE(run({"buffer", "write", "B", "--from", in, "--offset", "7"}, buffer.daemon().socket_path()).rc == 0);
    const CliRun r =
        run({"buffer", "read", "B", "--to", out, "--offset", "7", "--json"}, buffer.daemon().socket_path());
    REQUIRE(r.rc == 0);
    CHECK(read_whole_file(out) == content);
    CHECK(json::parse(r.out) == json{{"buffer", "B"}, {"offset", 7}, {"bytes", SIZE}, {"requests", 1}});
}

TEST_CASE("buffer write and read past the end fail with the daemon's error or its words", "[cli]") {
    BufferDaemon buffer(8);
    const std::string file = write_file(buffer.daemon().dir(), "in.bin", "0123456789");
    const CliRun w = run({"buffer", "write", "B", "--from", file}, buffer.daemon().socket_path());
    CHECK(w.rc == 1);
    CHECK(w.err == "canopy: BAD_REQUEST: write past the end\n");
    // A read that the buffer's end cuts short.
    const CliRun r =
        run({"buffer", "read", "B", "--to", buffer.daemon().dir() + "/o", "--offset", "4", "--bytes", "10"},
            buffer.daemon().socket_path());
    CHECK(r.rc == 1);
    CHECK(r.err == "canopy: BAD_REQUEST: reading 10 bytes at offset 4 runs past the end of the 8-byte buffer\n");
    CHECK_FALSE(std::filesystem::exists(buffer.daemon().dir() + "/o"));
}

TEST_CASE("buffer write from a missing file is a usage error before any request", "[cli]") {
    BufferDaemon buffer(8);
    const CliRun r =
        run({"buffer", "write", "B", "--from", buffer.daemon().dir() + "/none"}, buffer.daemon().socket_path());
    CHECK(r.rc == 2);
    CHECK(r.err.find("--from \"" + buffer.daemon().dir() + "/none\": cannot open: No such file or directory") !=
          std::string::npos);
    CHECK(buffer.daemon().requests().empty());
}

TEST_CASE("buffer read with an offset past the end is a usage error", "[cli]") {
    BufferDaemon buffer(8);
    const CliRun r = run({"buffer", "read", "B", "--to", buffer.daemon().dir() + "/o", "--offset", "9"},
                         buffer.daemon().socket_path());
    CHECK(r.rc == 2);
    CHECK(r.err.find("--offset \"9\": past the end of B (8 bytes)") != std::string::npos);
}

TEST_CASE("a failed read leaves no partial file behind", "[cli]") {
    FakeDaemon daemon([](const json& request) {
        if (request["op"] == "buffer.read") {
            return error("STALE_BUFFER", "B was released");
        }
        return error("BAD_REQUEST", "no fd here");
    });
    const std::string file = daemon.dir() + "/out.bin";
    const CliRun r = run({"buffer", "read", "B", "--to", file, "--bytes", "1M"}, daemon.socket_path());
    CHECK(r.rc == 1);
    CHECK(r.err == "canopy: STALE_BUFFER: B was released\n");
    CHECK_FALSE(std::filesystem::exists(file));
}

TEST_CASE("a read reply that announces more bytes than asked, or whose bytes stop early, is a protocol error",
          "[cli]") {
    FakeDaemon too_many([](const json& request) {
        return request["op"] == "buffer.fd" ? error("BAD_REQUEST", "no fd") : ok_with("abcde", {{"rest", 0}});
    });
    const CliRun m =
        run({"buffer", "read", "B", "--to", too_many.dir() + "/o", "--bytes", "4"}, too_many.socket_path());
    CHECK(m.rc == 1);
    CHECK(m.err == "canopy: PROTOCOL_ERROR: the reply to \"buffer.read\" announces 5 bytes for a read of 4\n");

    FakeDaemon cut_off([](const json& request) {
        if (request["op"] == "buffer.fd") {
            return error("BAD_REQUEST", "no fd");
        }
        FakeReply reply = ok_with("ab", {{"rest", 0}});
        reply.body->at("attachment") = 4;
        reply.close_after = true;
        return reply;
    });
    const CliRun c = run({"buffer", "read", "B", "--to", cut_off.dir() + "/o", "--bytes", "4"}, cut_off.socket_path());
    CHECK(c.rc == 1);
    CHECK(c.err == "canopy: PROTOCOL_ERROR: canopyd closed the connection in the middle of an attachment (2 of 4 "
                   "bytes)\n");
}

TEST_CASE("a write reply with the wrong count is a protocol error", "[cli]") {
    FakeDaemon daemon([](const json& request) {
        return request["op"] == "buffer.fd" ? error("BAD_REQUEST", "no fd") : ok({{"written", 1}});
    });
    const std::string file = write_file(daemon.dir(), "in.bin", "abcd");
    const CliRun r = run({"buffer", "write", "B", "--from", file}, daemon.socket_path());
    CHECK(r.rc == 1);
    CHECK(r.err == "canopy: PROTOCOL_ERROR: buffer.write of 4 bytes at offset 0 replied written 1\n");
}
