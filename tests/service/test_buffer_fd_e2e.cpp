// buffer.fd through a real daemon: a client gets the fd of a buffer over the control socket and maps the bytes
// itself; the CLI moves files that way in one request; the fd is read-only where the buffer or the request is;
// the hand-over waits for earlier tasks over the buffer.
#include "fixture.h"
#include "helpers.h"
#include "ipc/mapped_region.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sys/mman.h>

using namespace canopy;
using namespace canopy::e2e;
using nlohmann::json;

namespace {

// One request on `client`'s connection; the reply and the fds that came with it.
std::pair<json, std::vector<ipc::UniqueFd>> request_fds(RawClient& client, const json& body) {
    json reply = client.request(body);
    return {std::move(reply), client.take_fds()};
}

std::string random_bytes(std::size_t n) {
    std::string s(n, '\0');
    std::uint64_t x = 0x9e3779b97f4a7c15ull;
    for (auto& c : s) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        c = static_cast<char>(x);
    }
    return s;
}

} // namespace

TEST_CASE("buffer write and read move a file through the buffer's fd in one request each", "[service][fd]") {
    Daemon d(e2e_config(1, 1));
    constexpr std::size_t SIZE = 8u << 20;
    const std::string id = d.create_buffer(SIZE + 100);
    TempDir dir;
    const std::string in = (dir.path / "in.bin").string();
    const std::string out = (dir.path / "out.bin").string();
    const std::string content = random_bytes(SIZE);
    std::ofstream(in, std::ios::binary) << content;
    const json written = d.cli_json({"buffer", "write", id, "--from", in, "--offset", "100"});
    CHECK(written == json{{"buffer", id}, {"offset", 100}, {"written", SIZE}, {"requests", 1}});
    const json read =
        d.cli_json({"buffer", "read", id, "--to", out, "--offset", "100", "--bytes", std::to_string(SIZE)});
    CHECK(read.at("requests") == 1);
    CHECK(read_file(out) == content);
    // A task sees the bytes written through the mapping: copy them to a second buffer and read that back.
    const std::string copy = d.create_buffer(SIZE);
    REQUIRE(d.cli({"submit", "copy", "--on", "sub0", "--in", id + ":uint8:" + std::to_string(SIZE) + "::100", "--out",
                   copy + ":uint8:" + std::to_string(SIZE), "--wait"})
                .rc == 0);
    REQUIRE(d.cli({"buffer", "read", copy, "--to", out}).rc == 0);
    CHECK(read_file(out) == content);
    // Past the end: the same words as the daemon's own check, and nothing written.
    const auto over = d.cli({"buffer", "write", id, "--from", in, "--offset", "200"});
    CHECK(over.rc == 1);
    CHECK_THAT(over.err, Catch::Contains("BAD_REQUEST: writing 8388608 bytes at offset 200 runs past the end of the "
                                         "8388708-byte buffer"));
}

TEST_CASE("buffer.fd hands out a read-only fd when asked, and its owner a writable one whatever the grant",
          "[service][fd]") {
    Daemon d(e2e_config(0, 1));
    const std::string readonly = d.create_buffer(4096, "r");
    const std::string writable = d.create_buffer(4096);
    RawClient client(d.socket());
    for (const std::string& id : {readonly, writable}) {
        INFO(id);
        auto [reply, fds] = request_fds(client, {{"op", "buffer.fd"}, {"buffer", id}, {"access", "read"}});
        REQUIRE(reply.at("ok") == true);
        CHECK(reply.at("writable") == false);
        CHECK(reply.at("bytes") == 4096);
        CHECK(reply.at("fds") == 1);
        CHECK(reply.at("buffer").at("id") == id);
        REQUIRE(fds.size() == 1);
        errno = 0;
        CHECK(::mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0].get(), 0) == MAP_FAILED);
        CHECK(errno == EACCES);
        auto region = ipc::MappedRegion::map_shared(fds[0].get(), 4096, false);
        CHECK(region.data() != nullptr);
    }
    // The grant "r" bounds tasks; the owner fills the buffer from the host, as buffer.write does.
    auto [owner, owner_fds] = request_fds(client, {{"op", "buffer.fd"}, {"buffer", readonly}});
    CHECK(owner.at("writable") == true);
    REQUIRE(owner_fds.size() == 1);
    CHECK(ipc::MappedRegion::map_shared(owner_fds[0].get(), 4096, true).data() != nullptr);
    auto [bad, no_fds] = request_fds(client, {{"op", "buffer.fd"}, {"buffer", writable}, {"access", "rw"}});
    CHECK(bad.at("error").at("code") == "BAD_REQUEST");
    CHECK(bad.at("error").at("message") == "access: expected \"read\" or \"readwrite\", got \"rw\"");
    auto [unknown, nothing] = request_fds(client, {{"op", "buffer.fd"}, {"buffer", "no-such-buffer"}});
    CHECK(unknown.at("error").at("code") == "UNKNOWN_BUFFER");
    // A writable fd maps writable, and what is written through it is the buffer's.
    auto [reply, fds] = request_fds(client, {{"op", "buffer.fd"}, {"buffer", writable}});
    REQUIRE(fds.size() == 1);
    CHECK(reply.at("writable") == true);
    auto region = ipc::MappedRegion::map_shared(fds[0].get(), 4096, true);
    std::memcpy(region.data(), "canopy", 6);
    TempDir dir;
    const std::string out = (dir.path / "out.bin").string();
    REQUIRE(d.cli({"buffer", "read", writable, "--to", out, "--bytes", "6"}).rc == 0);
    CHECK(read_file(out) == "canopy");
}

TEST_CASE("buffer.fd answers only after the earlier tasks that write the buffer finished", "[service][fd]") {
    Daemon d(e2e_config(0, 1));
    const std::string id = d.create_buffer(4096);
    // The fill waits on sub0 behind a 500 ms sleep; the fd hand-over waits for the fill.
    REQUIRE(d.cli({"submit", "sleep_ms", "--on", "sub0", "--scalar", "int64:500"}).rc == 0);
    REQUIRE(d.cli({"submit", "fill", "--on", "sub0", "--out", id + ":float32:1024", "--scalar", "float32:2.5"}).rc ==
            0);
    RawClient client(d.socket());
    auto [reply, fds] = request_fds(client, {{"op", "buffer.fd"}, {"buffer", id}, {"access", "read"}});
    REQUIRE(fds.size() == 1);
    auto region = ipc::MappedRegion::map_shared(fds[0].get(), 4096, false);
    const auto* values = reinterpret_cast<const float*>(region.data());
    CHECK(values[0] == 2.5f);
    CHECK(values[1023] == 2.5f);
}
