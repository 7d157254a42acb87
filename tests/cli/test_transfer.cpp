// buffer write / buffer read in chunks against a fake daemon that holds a buffer's bytes.

#include "cli/transfer.h"
#include "protocol/base64.h"
#include "tests/cli/fake_daemon.h"

#include <catch2/catch.hpp>
#include <filesystem>
#include <random>

using namespace canopy::cli;
using namespace canopy::cli::testing;
using canopy::base64_decode;
using canopy::base64_encode;
using nlohmann::json;

namespace {

// A fake daemon with one buffer "B" of `nbytes` bytes, serving buffer.show, buffer.write and buffer.read
// as docs/control-protocol.md says, ranges past the end included.
class BufferDaemon {
public:
    explicit BufferDaemon(std::size_t nbytes)
        : bytes_(nbytes, '\0'), daemon_([this](const json& r) { return serve(r); }) {}

    FakeDaemon& daemon() { return daemon_; }
    const std::string& bytes() const { return bytes_; }
    std::string& bytes() { return bytes_; }

private:
    FakeReply serve(const json& request) {
        const std::string op = request["op"];
        if (request.value("buffer", "") != "B") {
            return error("UNKNOWN_BUFFER", "no buffer " + request.value("buffer", ""));
        }
        const std::uint64_t offset = request.value("offset", std::uint64_t{0});
        if (op == "buffer.show") {
            return ok({{"buffer", {{"id", "B"}, {"nbytes", bytes_.size()}}}});
        }
        if (op == "buffer.fd") { // a daemon without fd hand-over: the CLI moves the bytes in chunks
            return error("BAD_REQUEST", "unknown op \"buffer.fd\"");
        }
        if (op == "buffer.write") {
            const std::string data = base64_decode(request["data"].get<std::string>());
            if (offset + data.size() > bytes_.size()) {
                return error("BAD_REQUEST", "write past the end");
            }
            bytes_.replace(offset, data.size(), data);
            return ok({{"written", data.size()}});
        }
        const std::uint64_t n = request.value("bytes", std::min<std::uint64_t>(bytes_.size() - offset, CHUNK_BYTES));
        if (offset + n > bytes_.size()) {
            return error("BAD_REQUEST", "read past the end");
        }
        return ok({{"data", base64_encode(bytes_.substr(offset, n))}});
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
            ranges.emplace_back(r["offset"], base64_decode(r["data"].get<std::string>()).size());
        }
    }
    return ranges;
}

} // namespace

TEST_CASE("buffer write splits a file into 512 KiB chunks at increasing offsets", "[cli]") {
    constexpr std::size_t SIZE = 1'300'000;
    BufferDaemon buffer(2u << 20);
    const std::string content = random_bytes(SIZE, 1);
    const std::string file = write_file(buffer.daemon().dir(), "in.bin", content);
    const CliRun r = run({"buffer", "write", "B", "--from", file, "--offset", "100"}, buffer.daemon().socket_path());
    REQUIRE(r.rc == 0);
    CHECK(write_ranges(buffer.daemon()) ==
          std::vector<std::pair<std::uint64_t, std::size_t>>{{100, 524288}, {524388, 524288}, {1048676, 251424}});
    CHECK(buffer.bytes().substr(100, SIZE) == content);
    for (const auto& request : buffer.daemon().requests()) {
        CHECK(request.dump().size() < (1u << 20));
    }
}

TEST_CASE("buffer write of an exact multiple of the chunk sends no empty tail", "[cli]") {
    BufferDaemon buffer(1u << 20);
    const std::string file = write_file(buffer.daemon().dir(), "in.bin", random_bytes(1u << 20, 2));
    REQUIRE(run({"buffer", "write", "B", "--from", file}, buffer.daemon().socket_path()).rc == 0);
    CHECK(write_ranges(buffer.daemon()) ==
          std::vector<std::pair<std::uint64_t, std::size_t>>{{0, 524288}, {524288, 524288}});
}

TEST_CASE("buffer write of an empty file sends one empty write", "[cli]") {
    BufferDaemon buffer(16);
    const std::string file = write_file(buffer.daemon().dir(), "empty.bin", "");
    const CliRun r = run({"buffer", "write", "B", "--from", file, "--json"}, buffer.daemon().socket_path());
    REQUIRE(r.rc == 0);
    CHECK(write_ranges(buffer.daemon()) == std::vector<std::pair<std::uint64_t, std::size_t>>{{0, 0}});
    CHECK(json::parse(r.out) == json{{"buffer", "B"}, {"offset", 0}, {"written", 0}, {"requests", 1}});
}

TEST_CASE("buffer read reassembles a buffer byte for byte from 512 KiB chunks", "[cli]") {
    constexpr std::size_t SIZE = (1u << 20) + 12345;
    BufferDaemon buffer(SIZE);
    buffer.bytes() = random_bytes(SIZE, 3);
    const std::string file = buffer.daemon().dir() + "/out.bin";
    const CliRun r = run({"buffer", "read", "B", "--to", file}, buffer.daemon().socket_path());
    REQUIRE(r.rc == 0);
    CHECK(read_whole_file(file) == buffer.bytes());
    const auto requests = buffer.daemon().requests();
    // The fake daemon has no buffer.fd, so the CLI falls back to chunks.
    REQUIRE(requests.size() == 5);
    CHECK(requests[0] == json{{"op", "buffer.show"}, {"buffer", "B"}, {"id", 1}});
    CHECK(requests[1] == json{{"op", "buffer.fd"}, {"buffer", "B"}, {"access", "read"}, {"id", 2}});
    CHECK(requests[2] == json{{"op", "buffer.read"}, {"buffer", "B"}, {"offset", 0}, {"bytes", 524288}, {"id", 3}});
    CHECK(requests[3] ==
          json{{"op", "buffer.read"}, {"buffer", "B"}, {"offset", 524288}, {"bytes", 524288}, {"id", 4}});
    CHECK(requests[4] ==
          json{{"op", "buffer.read"}, {"buffer", "B"}, {"offset", 1048576}, {"bytes", 12345}, {"id", 5}});
    CHECK(r.out == "read " + std::to_string(SIZE) + " bytes of B at offset 0 into " + file + "\n");
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
    CHECK(json::parse(r.out) == json{{"buffer", "B"}, {"offset", 7}, {"bytes", SIZE}, {"requests", 3}});
}

TEST_CASE("buffer write past the end fails with the daemon's error", "[cli]") {
    BufferDaemon buffer(8);
    const std::string file = write_file(buffer.daemon().dir(), "in.bin", "0123456789");
    const CliRun r = run({"buffer", "write", "B", "--from", file}, buffer.daemon().socket_path());
    CHECK(r.rc == 1);
    CHECK(r.err == "canopy: BAD_REQUEST: write past the end\n");
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
    int reads = 0;
    FakeDaemon daemon([&reads](const json& request) {
        if (request["op"] == "buffer.read" && ++reads == 2) {
            return error("STALE_BUFFER", "B was released");
        }
        return ok({{"data", base64_encode(std::string(request.value("bytes", 0u), 'a'))}});
    });
    const std::string file = daemon.dir() + "/out.bin";
    const CliRun r = run({"buffer", "read", "B", "--to", file, "--bytes", "1M"}, daemon.socket_path());
    CHECK(r.rc == 1);
    CHECK(r.err == "canopy: STALE_BUFFER: B was released\n");
    CHECK_FALSE(std::filesystem::exists(file));
}

TEST_CASE("a read reply that is short or not base64 is a protocol error", "[cli]") {
    FakeDaemon short_reply([](const json&) { return ok({{"data", base64_encode("abc")}}); });
    const CliRun s =
        run({"buffer", "read", "B", "--to", short_reply.dir() + "/o", "--bytes", "4"}, short_reply.socket_path());
    CHECK(s.rc == 1);
    CHECK(s.err == "canopy: PROTOCOL_ERROR: buffer.read of [0, 4) returned 3 bytes\n");

    FakeDaemon bad_reply([](const json&) { return ok({{"data", "Zg="}}); });
    const CliRun b =
        run({"buffer", "read", "B", "--to", bad_reply.dir() + "/o", "--bytes", "1"}, bad_reply.socket_path());
    CHECK(b.rc == 1);
    CHECK(b.err == "canopy: PROTOCOL_ERROR: buffer.read of [0, 1): base64: length 3 is not a multiple of 4\n");
}

TEST_CASE("a write reply with the wrong count is a protocol error", "[cli]") {
    FakeDaemon daemon([](const json&) { return ok({{"written", 1}}); });
    const std::string file = write_file(daemon.dir(), "in.bin", "abcd");
    const CliRun r = run({"buffer", "write", "B", "--from", file}, daemon.socket_path());
    CHECK(r.rc == 1);
    CHECK(r.err == "canopy: PROTOCOL_ERROR: buffer.write of [0, 4) replied written 1, expected 4\n");
}
