#pragma once
// The node's side of a task call from its L4 (daemon/remote_server.h): the bytes of one TaskCall become a
// TaskRequest here, and nowhere else. The TaskArgs blob goes through decode_task_args (validate_tensor on every
// argument), the launch configuration must be exactly sizeof(LaunchConfig) bytes; the kernel and worker names
// are checked by the Supervisor the request is submitted to.
//
// The same holds for the other bytes that cross the link: a Buffer call becomes a BufferCall here on the node
// (decode_buffer_call), and the descriptor a node answered becomes a BufferDescriptor on the L4
// (remote_buffer_descriptor), each validated, as is the Hello a node opens a session with (hello_refusal).
//
// Thread safety: pure functions.

#include "daemon/request_error.h"
#include "daemon/task.h"
#include "protocol/descriptor.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace google::protobuf::io {
class ZeroCopyInputStream;
} // namespace google::protobuf::io

namespace canopy::remote::v1 {
class TaskCall;
class BufferCall;
class ReadCall;
class Chunk;
class Hello;
} // namespace canopy::remote::v1

namespace canopy::daemon {

// Throws WireError (the blob: INVALID_TENSOR, INVALID_DESCRIPTOR, ...) or RequestError(BAD_REQUEST) naming the
// field ("task.args: ...", "task.launch: ...").
TaskRequest decode_task_call(const canopy::remote::v1::TaskCall& call);

// The most chips of a symmetric buffer's world a Buffer call names (Supervisor's MAX_WORLD).
inline constexpr std::size_t MAX_REMOTE_WORLD = 8;

// A Buffer call as the node acts on it: a creation of `nbytes` with `access`, or the release of `release`.
struct BufferCallRequest {
    bool create = false;
    std::uint64_t nbytes = 0;
    Access access = Access::READWRITE;
    CanonicalIdentity release{};
    std::string chip;               // a creation in this chip's device memory; empty for POSIX_SHM
    std::vector<std::string> world; // a symmetric creation over these chips, rank order
};

// Throws RequestError(BAD_REQUEST) naming the field: no operation, an access outside 1..3, a chip name that is not
// one path element of 1..63 printable characters (world's too), both a chip and a world, a world of more than
// MAX_REMOTE_WORLD chips, a release that is not 32 bytes.
BufferCallRequest decode_buffer_call(const canopy::remote::v1::BufferCall& call);

// The most data bytes one Chunk of a Read or a Write carries.
inline constexpr std::uint64_t MAX_CHUNK_BYTES = std::uint64_t{4} << 20;

// The largest message an L4 takes from a node: a Read's chunk (MAX_CHUNK_BYTES of data behind a head of a few
// dozen bytes, or a refusal of at most MAX_CHUNK_MESSAGE_BYTES) and a batch of task replies (MAX_BATCH_BYTES and
// the reply that crossed it) fit with room to spare. A larger one ends its call RESOURCE_EXHAUSTED, which on the
// session or the task stream loses the host, saying so.
inline constexpr std::uint64_t MAX_NODE_MESSAGE_BYTES = MAX_CHUNK_BYTES + (std::uint64_t{1} << 20);

// The bytes of a buffer a Read or a Write moves: [offset, offset + length) of `buffer`.
struct ByteRange {
    CanonicalIdentity buffer{};
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
};

// The most bytes of a refusal's message one Chunk carries.
inline constexpr std::uint64_t MAX_CHUNK_MESSAGE_BYTES = 64 << 10;

// A Chunk as it arrives on a Read or a Write stream, parsed where it lies: every field but data, and where the data
// is, so that its bytes are copied once, straight to where the range puts them (copy_chunk_data), never into a
// message first. A field the message leaves out reads as protobuf's default.
struct ChunkLayout {
    std::uint64_t session = 0;
    std::string buffer;
    std::uint64_t offset = 0;
    std::uint64_t length = 0;
    std::uint32_t code = 0;
    std::string message;
    std::uint64_t data_at = 0;   // bytes from the start of the message to the first data byte
    std::uint64_t data_size = 0; // 0 for a chunk without data
};

// Reads the protobuf encoding of one Chunk from `message` (`stream` names it in errors: "read", "write"). Throws
// RequestError(BAD_REQUEST) naming what is wrong: a field cut short, a tag that is not valid (field 0, or encoded
// in more bytes than protobuf's parser takes), a wire type that is not the field's, a group, a buffer of more
// than 64 bytes, a message of more than MAX_CHUNK_MESSAGE_BYTES or not UTF-8, data of more than MAX_CHUNK_BYTES,
// or a second data field. Other fields are skipped, as protobuf does. Whatever it accepts, protobuf's own parse
// reads to the same fields and data (tests/fuzz/fuzz_remote_buffer.cpp checks it).
ChunkLayout scan_chunk(google::protobuf::io::ZeroCopyInputStream& message, const char* stream);
// Copies the data that `layout` (scan_chunk's answer) found to `to`, reading a second pass over the same bytes
// from `message`. Throws RequestError(BAD_REQUEST) when the bytes end first.
void copy_chunk_data(google::protobuf::io::ZeroCopyInputStream& message, const ChunkLayout& layout, std::byte* to);

// A Read call's range, and the range the first chunk of a Write names. Throws RequestError(BAD_REQUEST) naming the
// field: a buffer that is not a 32-byte identity, a length of 0, a range whose end is past 2^64 - 1, and for a
// Write a first chunk with more data than its length (scan_chunk refuses more than MAX_CHUNK_BYTES). Whether the
// range lies in the buffer is for the node to check against the buffer it names (check_range).
ByteRange decode_read_call(const canopy::remote::v1::ReadCall& call);
ByteRange decode_write_head(const ChunkLayout& chunk);
// Throws RequestError(BAD_REQUEST) when `range` runs past the end of a buffer of `nbytes`.
void check_range(const ByteRange& range, std::uint64_t nbytes);

// The bytes of a descriptor as lowercase hex, two characters a byte.
std::string remote_buffer_hex(std::string_view descriptor_bytes);
// The descriptor a remote creation answered. Throws RequestError(INVALID_DESCRIPTOR) naming `host` when `hex` is
// not the hex of 96 bytes or validate_descriptor refuses them.
BufferDescriptor remote_buffer_descriptor(std::string_view hex, const std::string& host);

// What is wrong with the Hello a node opened its session with, as the L4 reads it ("names session 0"), or
// nothing: the protocol is `protocol`, the session is not 0, and the buffer owner nonce is 16 bytes, not all zero.
std::optional<std::string> hello_refusal(const canopy::remote::v1::Hello& hello, std::uint32_t protocol);

} // namespace canopy::daemon
