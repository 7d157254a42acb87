#pragma once
// Chunks of a Read or a Write stream as raw gRPC messages, so that a chunk's bytes are copied as few times as
// the kernel allows. Going out, a chunk is its head (a Chunk without data, serialized) followed by the data field
// as a slice over the mapping the bytes are in: gRPC writes them to the socket from there. Coming in, a chunk is
// parsed where gRPC received it (scan_chunk, daemon/remote_call.h) and its data copied once, to where its range
// puts it. The wire bytes are a Chunk's protobuf encoding either way, so either end may use the typed messages.
//
// Thread safety: pure functions over the messages they are given.

#include "daemon/remote_call.h"

#include <cstddef>
#include <grpcpp/support/byte_buffer.h>
#include <memory>

namespace canopy::remote::v1 {
class Chunk;
} // namespace canopy::remote::v1

namespace canopy::daemon {

// The message of one chunk: `head`'s fields (its data, if any, is left out) and then `n` bytes at `data` as its
// data field, which gRPC reads from `data` until it is done with the message; `keep` is held until then. Throws
// std::length_error for more than MAX_CHUNK_BYTES.
grpc::ByteBuffer chunk_message(const canopy::remote::v1::Chunk& head, const std::byte* data, std::size_t n,
                               std::shared_ptr<const void> keep);

// scan_chunk and copy_chunk_data over a received message (it is not consumed: both read it in place).
ChunkLayout scan_chunk(grpc::ByteBuffer& message, const char* stream);
void copy_chunk_data(grpc::ByteBuffer& message, const ChunkLayout& layout, std::byte* to);

// Sets this process's allocator to keep up to 64 MiB of freed memory (M_TRIM_THRESHOLD) instead of giving it
// back to the kernel at once. gRPC receives each chunk into new buffers and frees them after the copy; with
// glibc's default the heap's top was returned and faulted in again, page by page, for every chunk, which cost a
// third of a copy's throughput. Called by the processes that stream chunks: a remote node's link and a canopyd
// that serves an L4.
void keep_freed_memory_for_chunks();

} // namespace canopy::daemon
