// The decoders of what crosses a remote link (daemon/remote_call.h), on bytes a peer could send: each refusal
// with its exact error, and what they accept read back exactly.
#include "daemon/remote_call.h"
#include "remote/canopy_remote.pb.h"

#include <catch2/catch.hpp>
#include <cstring>

using namespace canopy;
using daemon::RequestError;
namespace pb = canopy::remote::v1;

namespace {

template <typename F>
std::string refusal(F&& decode, ErrorCode expected) {
    try {
        decode();
    } catch (const RequestError& e) {
        CHECK(e.code() == expected);
        return e.what();
    }
    FAIL("accepted");
    return {};
}

CanonicalIdentity identity() {
    CanonicalIdentity id{};
    id.owner_instance[0] = 7;
    id.buffer_id = 3;
    id.generation = 2;
    return id;
}

} // namespace

TEST_CASE("a Buffer call is decoded, or refused naming its field", "[remote]") {
    pb::BufferCall create;
    create.set_session(1);
    create.set_create_bytes(4096);
    create.set_access(1);
    const auto made = daemon::decode_buffer_call(create);
    CHECK(made.create);
    CHECK(made.nbytes == 4096);
    CHECK(made.access == Access::READ);

    const CanonicalIdentity id = identity();
    pb::BufferCall release;
    release.set_release(std::string(reinterpret_cast<const char*>(&id), sizeof id));
    const auto released = daemon::decode_buffer_call(release);
    CHECK(!released.create);
    CHECK(released.release == id);

    for (const std::uint32_t access : {0u, 4u, 256u + 3u}) {
        create.set_access(access);
        CHECK(refusal([&] { (void)daemon::decode_buffer_call(create); }, ErrorCode::BAD_REQUEST) ==
              "buffer.access: " + std::to_string(access) + " is not 1, 2 or 3");
    }
    release.set_release(std::string(31, '\0'));
    CHECK(refusal([&] { (void)daemon::decode_buffer_call(release); }, ErrorCode::BAD_REQUEST) ==
          "buffer.release: 31 bytes for a 32-byte identity");
    CHECK(refusal([&] { (void)daemon::decode_buffer_call(pb::BufferCall{}); }, ErrorCode::BAD_REQUEST) ==
          "buffer: names neither create_bytes nor release");

    // A creation in a chip's device memory names the chip: one path element of printable characters.
    create.set_access(3);
    create.set_chip("chip0");
    CHECK(daemon::decode_buffer_call(create).chip == "chip0");
    for (const std::string& chip : {std::string("a/b"), std::string("chip 0"), std::string("chip\x7f"),
                                    std::string(64, 'c'), std::string("\x01")}) {
        create.set_chip(chip);
        CHECK(refusal([&] { (void)daemon::decode_buffer_call(create); }, ErrorCode::BAD_REQUEST) ==
              "buffer.chip: expected the name of one of the node's chips, 1..63 printable characters");
    }
    create.set_chip(std::string(63, 'c'));
    CHECK(daemon::decode_buffer_call(create).chip.size() == 63);

    // A symmetric creation names its world, rank order, and no chip.
    create.clear_chip();
    create.add_world("chip1");
    create.add_world("chip0");
    CHECK(daemon::decode_buffer_call(create).world == std::vector<std::string>{"chip1", "chip0"});
    create.set_chip("chip0");
    CHECK(refusal([&] { (void)daemon::decode_buffer_call(create); }, ErrorCode::BAD_REQUEST) ==
          "buffer: names both a chip and a world");
    create.clear_chip();
    create.add_world("");
    CHECK(refusal([&] { (void)daemon::decode_buffer_call(create); }, ErrorCode::BAD_REQUEST) ==
          "buffer.world[2]: empty");
    create.set_world(2, "a,b");
    CHECK(refusal([&] { (void)daemon::decode_buffer_call(create); }, ErrorCode::BAD_REQUEST) ==
          "buffer.world[2]: expected the name of one of the node's chips, 1..63 printable characters");
    create.clear_world();
    for (int i = 0; i < 9; ++i) {
        create.add_world("chip" + std::to_string(i));
    }
    CHECK(refusal([&] { (void)daemon::decode_buffer_call(create); }, ErrorCode::BAD_REQUEST) ==
          "buffer.world: 9 chips; a world has at most 8");
}

TEST_CASE("a Read call and the head of a Write name a range, or are refused naming the field", "[remote]") {
    const CanonicalIdentity id = identity();
    const std::string bytes(reinterpret_cast<const char*>(&id), sizeof id);
    pb::ReadCall read;
    read.set_session(4);
    read.set_buffer(bytes);
    read.set_offset(100);
    read.set_length(28);
    const daemon::ByteRange range = daemon::decode_read_call(read);
    CHECK(range.buffer == id);
    CHECK(range.offset == 100);
    CHECK(range.length == 28);
    // Inside a buffer of 128 bytes, and no more.
    daemon::check_range(range, 128);
    CHECK(refusal([&] { daemon::check_range(range, 127); }, ErrorCode::BAD_REQUEST) ==
          "28 bytes at offset 100 run past the end of the 127-byte buffer");
    CHECK(refusal([&] { daemon::check_range(range, 64); }, ErrorCode::BAD_REQUEST) ==
          "28 bytes at offset 100 run past the end of the 64-byte buffer");

    read.set_length(0);
    CHECK(refusal([&] { (void)daemon::decode_read_call(read); }, ErrorCode::BAD_REQUEST) == "read.length: 0 bytes");
    read.set_length(16);
    read.set_offset(UINT64_MAX - 15);
    CHECK(refusal([&] { (void)daemon::decode_read_call(read); }, ErrorCode::BAD_REQUEST) ==
          "read: offset 18446744073709551600 + length 16 overflows");
    read.set_offset(UINT64_MAX - 16);
    CHECK(daemon::decode_read_call(read).length == 16);
    read.set_buffer(bytes.substr(1));
    CHECK(refusal([&] { (void)daemon::decode_read_call(read); }, ErrorCode::BAD_REQUEST) ==
          "read.buffer: 31 bytes for a 32-byte identity");

    pb::Chunk head;
    head.set_buffer(bytes);
    head.set_length(8);
    head.set_data(std::string(8, 'x'));
    CHECK(daemon::decode_write_head(head).length == 8);
    head.set_data(std::string(9, 'x'));
    CHECK(refusal([&] { (void)daemon::decode_write_head(head); }, ErrorCode::BAD_REQUEST) ==
          "write.data: 9 bytes for a range of 8");
    head.set_length(daemon::MAX_CHUNK_BYTES * 2);
    head.set_data(std::string(daemon::MAX_CHUNK_BYTES + 1, 'x'));
    CHECK(refusal([&] { (void)daemon::decode_write_head(head); }, ErrorCode::BAD_REQUEST) ==
          "write.data: " + std::to_string(daemon::MAX_CHUNK_BYTES + 1) + " bytes in one chunk; at most " +
              std::to_string(daemon::MAX_CHUNK_BYTES));
    head.set_length(0);
    head.clear_data();
    CHECK(refusal([&] { (void)daemon::decode_write_head(head); }, ErrorCode::BAD_REQUEST) == "write.length: 0 bytes");
}

TEST_CASE("the descriptor a node answers is read back exactly, or refused INVALID_DESCRIPTOR naming the node",
          "[remote]") {
    const BufferDescriptor d = make_posix_shm_descriptor(identity(), 4096, Access::READWRITE, "cnpytest");
    const std::string hex = daemon::remote_buffer_hex(std::string_view(reinterpret_cast<const char*>(&d), sizeof d));
    CHECK(hex.size() == 192);
    const BufferDescriptor back = daemon::remote_buffer_descriptor(hex, "remote node /hb");
    CHECK(back == d);

    CHECK(refusal([&] { (void)daemon::remote_buffer_descriptor(hex.substr(2), "remote node /hb"); },
                  ErrorCode::INVALID_DESCRIPTOR) ==
          "the buffer remote node /hb created: 190 hex digits for a 96-byte descriptor");
    std::string upper = hex;
    upper[0] = 'G';
    CHECK(refusal([&] { (void)daemon::remote_buffer_descriptor(upper, "remote node /hb"); },
                  ErrorCode::INVALID_DESCRIPTOR) == "the buffer remote node /hb created: a descriptor that is not hex");
    BufferDescriptor bad = d;
    bad.magic ^= 1;
    const std::string bad_hex =
        daemon::remote_buffer_hex(std::string_view(reinterpret_cast<const char*>(&bad), sizeof bad));
    CHECK_THAT(refusal([&] { (void)daemon::remote_buffer_descriptor(bad_hex, "remote node /hb"); },
                       ErrorCode::INVALID_DESCRIPTOR),
               Catch::StartsWith("the buffer remote node /hb created: ") && Catch::Contains("magic"));
}
