// The decoders of what crosses a remote link (daemon/remote_call.h), on bytes a peer could send: each refusal
// with its exact error, and what they accept read back exactly.
#include "daemon/chunk_message.h"
#include "daemon/remote_call.h"
#include "daemon/remote_credentials.h"
#include "daemon/task_batch.h"
#include "remote/canopy_remote.pb.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <deque>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <grpcpp/support/slice.h>
#include <memory>
#include <spdlog/logger.h>
#include <spdlog/sinks/ringbuffer_sink.h>

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

    daemon::ChunkLayout head;
    head.buffer = bytes;
    head.length = 8;
    head.data_size = 8;
    CHECK(daemon::decode_write_head(head).length == 8);
    head.data_size = 9;
    CHECK(refusal([&] { (void)daemon::decode_write_head(head); }, ErrorCode::BAD_REQUEST) ==
          "write.data: 9 bytes for a range of 8");
    head.length = 0;
    head.data_size = 0;
    CHECK(refusal([&] { (void)daemon::decode_write_head(head); }, ErrorCode::BAD_REQUEST) == "write.length: 0 bytes");
}

namespace {

// scan_chunk over `bytes` handed out `block` bytes at a time, as gRPC hands out the slices of a message.
daemon::ChunkLayout scan(const std::string& bytes, int block = 7) {
    google::protobuf::io::ArrayInputStream in(bytes.data(), static_cast<int>(bytes.size()), block);
    return daemon::scan_chunk(in, "write");
}

std::string data_of(const std::string& bytes, const daemon::ChunkLayout& layout, int block = 5) {
    google::protobuf::io::ArrayInputStream in(bytes.data(), static_cast<int>(bytes.size()), block);
    std::string out(layout.data_size, '\0');
    daemon::copy_chunk_data(in, layout, reinterpret_cast<std::byte*>(out.data()));
    return out;
}

// One field's tag and the varint after it, as protobuf writes them.
std::string varint_field(int field, int wire_type, std::uint64_t value) {
    std::string out;
    google::protobuf::io::StringOutputStream stream(&out);
    google::protobuf::io::CodedOutputStream coded(&stream);
    coded.WriteTag(static_cast<std::uint32_t>(field << 3 | wire_type));
    coded.WriteVarint64(value);
    coded.Trim();
    return out;
}

} // namespace

TEST_CASE("a chunk is scanned where it lies: every field as protobuf reads it, its data copied across slices",
          "[remote]") {
    pb::Chunk chunk;
    chunk.set_session(9);
    chunk.set_buffer(std::string(32, 'b'));
    chunk.set_offset(4096);
    chunk.set_length(1 << 20);
    chunk.set_code(3);
    chunk.set_message("refused: \u00e9t\u00e9");
    std::string data(1000, '\0');
    for (std::size_t i = 0; i < data.size(); ++i) {
        data[i] = static_cast<char>(i * 31 + 7);
    }
    chunk.set_data(data);
    const std::string bytes = chunk.SerializeAsString();
    for (const int block : {1, 3, 64, 4096}) {
        const daemon::ChunkLayout layout = scan(bytes, block);
        CHECK(layout.session == 9);
        CHECK(layout.buffer == chunk.buffer());
        CHECK(layout.offset == 4096);
        CHECK(layout.length == 1 << 20);
        CHECK(layout.code == 3);
        CHECK(layout.message == chunk.message());
        CHECK(layout.data_size == 1000);
        CHECK(data_of(bytes, layout, block) == data);
    }

    // Fields in any order, unknown fields skipped, no data at all.
    pb::Chunk bare;
    bare.set_offset(5);
    const std::string unknown = varint_field(15, 0, 77) + bare.SerializeAsString() + varint_field(1, 0, 4);
    const daemon::ChunkLayout layout = scan(unknown);
    CHECK(layout.offset == 5);
    CHECK(layout.session == 4);
    CHECK(layout.data_size == 0);
    CHECK(scan("").data_size == 0);
}

TEST_CASE("a chunk that is not a Chunk's encoding, or over a limit, is refused naming what is wrong", "[remote]") {
    pb::Chunk chunk;
    chunk.set_data(std::string(8, 'x'));
    const std::string whole = chunk.SerializeAsString();
    CHECK(refusal([&] { (void)scan(whole.substr(0, whole.size() - 1)); }, ErrorCode::BAD_REQUEST) ==
          "write chunk: data is cut short: 8 bytes announced");
    CHECK(refusal([&] { (void)scan(whole + whole); }, ErrorCode::BAD_REQUEST) ==
          "write chunk: data: a second data field");
    CHECK(refusal([&] { (void)scan(varint_field(5, 0, 1)); }, ErrorCode::BAD_REQUEST) ==
          "write chunk: field 5 has wire type 0, not 2");
    CHECK(refusal([&] { (void)scan(varint_field(1, 2, 1)); }, ErrorCode::BAD_REQUEST) ==
          "write chunk: field 1 has wire type 2, not 0");
    CHECK(refusal([&] { (void)scan(varint_field(3, 0, 1).substr(0, 1)); }, ErrorCode::BAD_REQUEST) ==
          "write chunk: field 3 is cut short");
    CHECK(refusal([&] { (void)scan(std::string(1, '\0')); }, ErrorCode::BAD_REQUEST) ==
          "write chunk: a field tag that is not valid");
    // Field 1's tag in six bytes: CodedInputStream alone would read it, protobuf's parser does not.
    const std::string overlong("\x88\x80\x80\x80\x80\x00\x01", 7);
    CHECK_FALSE(pb::Chunk().ParseFromString(overlong));
    CHECK(refusal([&] { (void)scan(overlong); }, ErrorCode::BAD_REQUEST) ==
          "write chunk: a field tag that is not valid");
    // A length in six bytes, likewise.
    const std::string long_length("\x12\x81\x80\x80\x80\x80\x00x", 8);
    CHECK_FALSE(pb::Chunk().ParseFromString(long_length));
    CHECK(refusal([&] { (void)scan(long_length); }, ErrorCode::BAD_REQUEST) == "write chunk: field 2 is cut short");
    CHECK(refusal([&] { (void)scan(varint_field(9, 3, 0)); }, ErrorCode::BAD_REQUEST) ==
          "write chunk: field 9 has wire type 3, which a Chunk does not take");
    CHECK(refusal([&] { (void)scan(varint_field(5, 2, daemon::MAX_CHUNK_BYTES + 1)); }, ErrorCode::BAD_REQUEST) ==
          "write chunk: data: " + std::to_string(daemon::MAX_CHUNK_BYTES + 1) + " bytes; at most " +
              std::to_string(daemon::MAX_CHUNK_BYTES));
    pb::Chunk wide;
    wide.set_buffer(std::string(65, 'b'));
    CHECK(refusal([&] { (void)scan(wide.SerializeAsString()); }, ErrorCode::BAD_REQUEST) ==
          "write chunk: buffer: 65 bytes; at most 64");
    pb::Chunk chatty;
    chatty.set_message(std::string(daemon::MAX_CHUNK_MESSAGE_BYTES + 1, 'm'));
    CHECK(refusal([&] { (void)scan(chatty.SerializeAsString()); }, ErrorCode::BAD_REQUEST) ==
          "write chunk: message: " + std::to_string(daemon::MAX_CHUNK_MESSAGE_BYTES + 1) + " bytes; at most " +
              std::to_string(daemon::MAX_CHUNK_MESSAGE_BYTES));
    // A message field of bytes that are not UTF-8: protobuf's own parse refuses it as well.
    const std::string latin1 = varint_field(7, 2, 2).substr(0, 1) + std::string("\x02\xe9t", 3);
    CHECK_FALSE(pb::Chunk().ParseFromString(latin1));
    CHECK(refusal([&] { (void)scan(latin1); }, ErrorCode::BAD_REQUEST) == "write chunk: message is not UTF-8");
}

TEST_CASE("a chunk sent without copying its data is a Chunk's encoding, and holds its bytes until sent", "[remote]") {
    pb::Chunk head;
    head.set_session(2);
    head.set_buffer(std::string(32, 'i'));
    head.set_length(64);
    head.set_data("ignored: the data comes from the slice");
    auto bytes = std::make_shared<std::string>(64, 'd');
    std::weak_ptr<std::string> alive = bytes;
    {
        grpc::ByteBuffer message =
            daemon::chunk_message(head, reinterpret_cast<const std::byte*>(bytes->data()), bytes->size(), bytes);
        bytes.reset();
        CHECK_FALSE(alive.expired()); // the message holds them
        std::vector<grpc::Slice> slices;
        REQUIRE(message.Dump(&slices).ok());
        std::string wire;
        for (const grpc::Slice& s : slices) {
            wire.append(reinterpret_cast<const char*>(s.begin()), s.size());
        }
        pb::Chunk back;
        REQUIRE(back.ParseFromString(wire));
        CHECK(back.session() == 2);
        CHECK(back.buffer() == head.buffer());
        CHECK(back.length() == 64);
        CHECK(back.data() == std::string(64, 'd'));
        const daemon::ChunkLayout layout = daemon::scan_chunk(message, "read");
        CHECK(layout.data_size == 64);
        std::string copied(64, '\0');
        daemon::copy_chunk_data(message, layout, reinterpret_cast<std::byte*>(copied.data()));
        CHECK(copied == std::string(64, 'd'));
    }
    CHECK(alive.expired()); // and lets go when gRPC is done with the message
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

TEST_CASE("a batch of the Tasks stream takes the oldest calls, at most MAX_BATCH_CALLS and up to MAX_BATCH_BYTES",
          "[remote]") {
    const auto calls = [](std::size_t n, std::size_t args_bytes) {
        std::deque<pb::TaskCall> queued;
        for (std::size_t i = 0; i < n; ++i) {
            pb::TaskCall& call = queued.emplace_back();
            call.set_call_id(i + 1);
            call.set_args(std::string(args_bytes, 'a'));
        }
        return queued;
    };
    // Count: 2500 small calls make batches of 1024, 1024 and 452, in order.
    std::deque<pb::TaskCall> small = calls(2500, 8);
    std::uint64_t next = 1;
    for (const std::size_t expected : {std::size_t{1024}, std::size_t{1024}, std::size_t{452}}) {
        pb::TaskCalls batch;
        daemon::take_batch(small, *batch.mutable_calls());
        REQUIRE(static_cast<std::size_t>(batch.calls_size()) == expected);
        for (const pb::TaskCall& call : batch.calls()) {
            CHECK(call.call_id() == next++);
        }
    }
    CHECK(small.empty());

    // Bytes: calls of 400 KiB go three to a message (the third brings it past 1 MiB); a call of 2 MiB at the head
    // of the queue goes alone.
    std::deque<pb::TaskCall> large = calls(7, 400 << 10);
    large.emplace_back().set_args(std::string(2 << 20, 'b'));
    std::vector<int> sizes;
    while (!large.empty()) {
        pb::TaskCalls batch;
        daemon::take_batch(large, *batch.mutable_calls());
        sizes.push_back(batch.calls_size());
    }
    CHECK(sizes == std::vector<int>{3, 3, 2});
    std::deque<pb::TaskCall> alone;
    alone.emplace_back().set_args(std::string(2 << 20, 'b'));
    alone.emplace_back().set_call_id(9);
    pb::TaskCalls first;
    daemon::take_batch(alone, *first.mutable_calls());
    CHECK(first.calls_size() == 1);
    CHECK(alone.size() == 1);
}

TEST_CASE("a node's Hello is taken, or refused saying what is wrong", "[remote]") {
    pb::Hello hello;
    hello.set_name("hb");
    hello.set_session(4);
    hello.set_protocol(2);
    hello.set_owner_instance(std::string(15, '\0') + '\x01');
    CHECK_FALSE(daemon::hello_refusal(hello, 2));
    CHECK(daemon::hello_refusal(hello, 3) == "speaks remote protocol 2, this L4 3");
    pb::Hello no_session = hello;
    no_session.set_session(0);
    CHECK(daemon::hello_refusal(no_session, 2) == "names session 0");
    for (const std::size_t bytes : {std::size_t{0}, std::size_t{15}, std::size_t{17}}) {
        pb::Hello short_nonce = hello;
        short_nonce.set_owner_instance(std::string(bytes, '\x05'));
        CHECK(daemon::hello_refusal(short_nonce, 2) ==
              "holds a buffer owner nonce of " + std::to_string(bytes) + " bytes, not 16");
    }
    pb::Hello zero = hello;
    zero.set_owner_instance(std::string(16, '\0'));
    CHECK(daemon::hello_refusal(zero, 2) == "holds an all-zero buffer owner nonce");
}

TEST_CASE("protobuf's refusal of a string that is not UTF-8 goes to the daemon's log, at warning once", "[remote]") {
    auto sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(16);
    sink->set_pattern("%l %v");
    auto log = std::make_shared<spdlog::logger>("daemon", sink);
    log->set_level(spdlog::level::debug);
    daemon::route_grpc_log(log);
    // A TaskCall whose kernel (field 2, a string) is the byte 0xff, as a peer could send it.
    const std::string wire("\x12\x01\xff", 3);
    pb::TaskCall call;
    CHECK_FALSE(call.ParseFromString(wire));
    CHECK_FALSE(call.ParseFromString(wire));
    daemon::route_grpc_log(nullptr);
    CHECK_FALSE(call.ParseFromString(wire)); // dropped: nothing reaches stderr or the log
    const std::vector<std::string> lines = sink->last_formatted();
    REQUIRE(lines.size() == 2);
    const std::string refused = "protobuf: String field 'canopy.remote.v1.TaskCall.kernel' contains invalid UTF-8";
    CHECK_THAT(lines[0], Catch::StartsWith("warning " + refused));
    CHECK_THAT(lines[1], Catch::StartsWith("debug " + refused));
}
