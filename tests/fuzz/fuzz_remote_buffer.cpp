// libFuzzer target: the bytes of a remote node's buffers that cross the link, on arbitrary input. The node
// decodes a Buffer call of its L4 with decode_buffer_call, a Read call with decode_read_call and the first chunk of
// a Write with scan_chunk (in place, as both ends read every chunk) and decode_write_head, then checks the range
// against a buffer with check_range; the L4 reads the descriptor a node answered with remote_buffer_descriptor
// (daemon/remote_call.h), both from the input as it comes and from the input's own bytes as hex; and the Hello a
// node opens its session with (hello_refusal).
//
// Invariants: decode_buffer_call either throws RequestError or returns a creation whose access is valid, or a
// release of the call's 32 bytes; remote_buffer_descriptor either throws RequestError(INVALID_DESCRIPTOR) or
// returns a descriptor that passes validate_descriptor and, from hex, holds exactly the bytes encoded; a decoded
// range is never empty and never wraps, and check_range lets through only a range inside the buffer; a chunk
// scan_chunk accepts is one protobuf parses to the same fields, and copy_chunk_data gives its data exactly.
#include "daemon/remote_call.h"
#include "remote/canopy_remote.pb.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>
#include <string>
#include <string_view>

namespace {

void check_descriptor(std::string_view hex, std::string_view bytes) {
    try {
        const canopy::BufferDescriptor d = canopy::daemon::remote_buffer_descriptor(hex, "remote node /fuzz");
        canopy::validate_descriptor(d); // throws, and so crashes the run, if a bad descriptor got through
        if (!bytes.empty() && (bytes.size() != sizeof d || std::memcmp(bytes.data(), &d, sizeof d) != 0)) {
            std::abort();
        }
    } catch (const canopy::daemon::RequestError& e) {
        if (e.code() != canopy::ErrorCode::INVALID_DESCRIPTOR) {
            std::abort();
        }
    }
}

// A range as decoded: not empty, its end representable, its identity the call's bytes; inside a buffer of
// `nbytes` whenever check_range lets it through.
void check_decoded(const canopy::daemon::ByteRange& r, const std::string& buffer, std::uint64_t nbytes) {
    if (r.length == 0 || r.offset > UINT64_MAX - r.length || buffer.size() != sizeof r.buffer ||
        std::memcmp(buffer.data(), &r.buffer, sizeof r.buffer) != 0) {
        std::abort();
    }
    try {
        canopy::daemon::check_range(r, nbytes);
        if (r.offset + r.length > nbytes) {
            std::abort();
        }
    } catch (const canopy::daemon::RequestError& e) {
        if (e.code() != canopy::ErrorCode::BAD_REQUEST) {
            std::abort();
        }
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view input(reinterpret_cast<const char*>(data), size);
    check_descriptor(input, {});
    check_descriptor(canopy::daemon::remote_buffer_hex(input), input);
    canopy::remote::v1::BufferCall call;
    if (call.ParseFromArray(data, static_cast<int>(size))) {
        try {
            const auto decoded = canopy::daemon::decode_buffer_call(call);
            if (decoded.create
                    ? !canopy::is_valid(decoded.access)
                    : call.release().size() != sizeof decoded.release ||
                          std::memcmp(call.release().data(), &decoded.release, sizeof decoded.release) != 0) {
                std::abort();
            }
        } catch (const canopy::daemon::RequestError&) {
        }
    }
    // The Hello a node opens its session with: a Hello taken has a session, the protocol asked for and a nonce of
    // 16 bytes that are not all zero.
    canopy::remote::v1::Hello hello;
    if (hello.ParseFromArray(data, static_cast<int>(size)) && !canopy::daemon::hello_refusal(hello, 2) &&
        (hello.session() == 0 || hello.protocol() != 2 || hello.owner_instance().size() != 16 ||
         hello.owner_instance() == std::string(16, '\0'))) {
        std::abort();
    }
    const std::uint64_t nbytes = size == 0 ? 0 : std::uint64_t{data[0]} << (data[size - 1] % 48);
    canopy::remote::v1::ReadCall read;
    if (read.ParseFromArray(data, static_cast<int>(size))) {
        try {
            check_decoded(canopy::daemon::decode_read_call(read), read.buffer(), nbytes);
        } catch (const canopy::daemon::RequestError&) {
        }
    }
    // A chunk as the node and the L4 read one in place: whatever scan_chunk accepts, protobuf's own parse reads
    // the same fields and the same data.
    try {
        google::protobuf::io::ArrayInputStream in(data, static_cast<int>(size), 1 + static_cast<int>(size % 7));
        const canopy::daemon::ChunkLayout layout = canopy::daemon::scan_chunk(in, "write");
        canopy::remote::v1::Chunk chunk;
        if (!chunk.ParseFromArray(data, static_cast<int>(size)) || layout.session != chunk.session() ||
            layout.buffer != chunk.buffer() || layout.offset != chunk.offset() || layout.length != chunk.length() ||
            layout.code != chunk.code() || layout.message != chunk.message() ||
            layout.data_size != chunk.data().size() || layout.data_size > canopy::daemon::MAX_CHUNK_BYTES) {
            std::abort();
        }
        google::protobuf::io::ArrayInputStream again(data, static_cast<int>(size), 1 + static_cast<int>(size % 5));
        std::string copied(layout.data_size, '\0');
        canopy::daemon::copy_chunk_data(again, layout, reinterpret_cast<std::byte*>(copied.data()));
        if (copied != chunk.data()) {
            std::abort();
        }
        const auto range = canopy::daemon::decode_write_head(layout);
        if (layout.data_size > range.length) {
            std::abort();
        }
        check_decoded(range, layout.buffer, nbytes);
    } catch (const canopy::daemon::RequestError& e) {
        if (e.code() != canopy::ErrorCode::BAD_REQUEST) {
            std::abort();
        }
    }
    return 0;
}
