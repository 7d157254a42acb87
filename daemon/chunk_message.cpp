#include "daemon/chunk_message.h"

#include "remote/canopy_remote.pb.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/wire_format_lite.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/slice.h>
#include <malloc.h>
#include <stdexcept>
#include <string>

namespace canopy::daemon {

grpc::ByteBuffer chunk_message(const canopy::remote::v1::Chunk& head, const std::byte* data, std::size_t n,
                               std::shared_ptr<const void> keep) {
    using google::protobuf::internal::WireFormatLite;
    if (n > MAX_CHUNK_BYTES) {
        throw std::length_error("chunk_message: " + std::to_string(n) + " bytes; a chunk carries at most " +
                                std::to_string(MAX_CHUNK_BYTES));
    }
    std::string bytes;
    if (head.data().empty()) {
        head.SerializeToString(&bytes);
    } else {
        canopy::remote::v1::Chunk without = head;
        without.clear_data();
        without.SerializeToString(&bytes);
    }
    // The data field's tag and length; its bytes follow as a slice of their own.
    const std::uint32_t tag = WireFormatLite::MakeTag(5, WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
    std::uint8_t prefix[10]; // two varints of at most 5 bytes each
    std::uint8_t* end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(tag, prefix);
    end = google::protobuf::io::CodedOutputStream::WriteVarint32ToArray(static_cast<std::uint32_t>(n), end);
    bytes.append(reinterpret_cast<const char*>(prefix), static_cast<std::size_t>(end - prefix));
    if (n == 0) {
        grpc::Slice only(bytes);
        return grpc::ByteBuffer(&only, 1);
    }
    auto* held = new std::shared_ptr<const void>(std::move(keep));
    // gRPC only reads a slice it sends; the constructor's pointer is not const for slices it may own.
    const grpc::Slice slices[2] = {
        grpc::Slice(bytes),
        grpc::Slice(const_cast<std::byte*>(data), n,
                    [](void* p) { delete static_cast<std::shared_ptr<const void>*>(p); }, held)};
    return grpc::ByteBuffer(slices, 2);
}

ChunkLayout scan_chunk(grpc::ByteBuffer& message, const char* stream) {
    grpc::ProtoBufferReader reader(&message);
    if (!reader.status().ok()) {
        throw RequestError(ErrorCode::BAD_REQUEST,
                           std::string(stream) + " chunk: unreadable (" + reader.status().error_message() + ")");
    }
    return scan_chunk(static_cast<google::protobuf::io::ZeroCopyInputStream&>(reader), stream);
}

void copy_chunk_data(grpc::ByteBuffer& message, const ChunkLayout& layout, std::byte* to) {
    grpc::ProtoBufferReader reader(&message);
    copy_chunk_data(static_cast<google::protobuf::io::ZeroCopyInputStream&>(reader), layout, to);
}

void keep_freed_memory_for_chunks() {
    (void)::mallopt(M_TRIM_THRESHOLD, 64 << 20);
}

} // namespace canopy::daemon
