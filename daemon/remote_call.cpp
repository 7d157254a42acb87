#include "daemon/remote_call.h"

#include "protocol/task_args.h"
#include "remote/canopy_remote.pb.h"

#include <algorithm>
#include <cstring>
#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream.h>
#include <google/protobuf/stubs/common.h>
#include <google/protobuf/wire_format_lite.h>
#include <span>

namespace canopy::daemon {

TaskRequest decode_task_call(const canopy::remote::v1::TaskCall& call) {
    TaskRequest request;
    const std::string& blob = call.args();
    request.args = decode_task_args(std::as_bytes(std::span(blob.data(), blob.size())));
    if (call.launch().size() != sizeof(LaunchConfig)) {
        throw RequestError(ErrorCode::BAD_REQUEST, "task.launch: expected " + std::to_string(sizeof(LaunchConfig)) +
                                                       " bytes, got " + std::to_string(call.launch().size()));
    }
    std::memcpy(&request.launch, call.launch().data(), sizeof request.launch);
    request.kernel = call.kernel();
    request.worker = call.worker();
    request.timeout = std::chrono::milliseconds(call.timeout_ms());
    return request;
}

BufferCallRequest decode_buffer_call(const canopy::remote::v1::BufferCall& call) {
    BufferCallRequest out;
    switch (call.op_case()) {
    case canopy::remote::v1::BufferCall::kCreateBytes: {
        const auto access = static_cast<Access>(call.access());
        if (call.access() > 0xff || !is_valid(access)) {
            throw RequestError(ErrorCode::BAD_REQUEST,
                               "buffer.access: " + std::to_string(call.access()) + " is not 1, 2 or 3");
        }
        out.create = true;
        out.nbytes = call.create_bytes();
        out.access = access;
        const auto chip_name = [](const std::string& chip, const std::string& field) {
            if (chip.size() > 63 || chip.find('/') != std::string::npos || chip.find(',') != std::string::npos ||
                std::any_of(chip.begin(), chip.end(), [](char c) { return c <= 0x20 || c >= 0x7f; })) {
                throw RequestError(ErrorCode::BAD_REQUEST, field + ": expected the name of one of the node's chips, "
                                                                   "1..63 printable characters");
            }
            return chip;
        };
        out.chip = chip_name(call.chip(), "buffer.chip");
        if (call.world_size() > 0 && !out.chip.empty()) {
            throw RequestError(ErrorCode::BAD_REQUEST, "buffer: names both a chip and a world");
        }
        if (static_cast<std::size_t>(call.world_size()) > MAX_REMOTE_WORLD) {
            throw RequestError(ErrorCode::BAD_REQUEST, "buffer.world: " + std::to_string(call.world_size()) +
                                                           " chips; a world has at most " +
                                                           std::to_string(MAX_REMOTE_WORLD));
        }
        for (int i = 0; i < call.world_size(); ++i) {
            const std::string field = "buffer.world[" + std::to_string(i) + "]";
            if (call.world(i).empty()) {
                throw RequestError(ErrorCode::BAD_REQUEST, field + ": empty");
            }
            out.world.push_back(chip_name(call.world(i), field));
        }
        return out;
    }
    case canopy::remote::v1::BufferCall::kRelease:
        if (call.release().size() != sizeof out.release) {
            throw RequestError(ErrorCode::BAD_REQUEST, "buffer.release: " + std::to_string(call.release().size()) +
                                                           " bytes for a 32-byte identity");
        }
        std::memcpy(&out.release, call.release().data(), sizeof out.release);
        return out;
    default:
        throw RequestError(ErrorCode::BAD_REQUEST, "buffer: names neither create_bytes nor release");
    }
}

namespace {

ByteRange decode_range(const std::string& buffer, std::uint64_t offset, std::uint64_t length, const char* what) {
    ByteRange out;
    if (buffer.size() != sizeof out.buffer) {
        throw RequestError(ErrorCode::BAD_REQUEST, std::string(what) + ".buffer: " + std::to_string(buffer.size()) +
                                                       " bytes for a 32-byte identity");
    }
    std::memcpy(&out.buffer, buffer.data(), sizeof out.buffer);
    if (length == 0) {
        throw RequestError(ErrorCode::BAD_REQUEST, std::string(what) + ".length: 0 bytes");
    }
    if (offset > UINT64_MAX - length) {
        throw RequestError(ErrorCode::BAD_REQUEST, std::string(what) + ": offset " + std::to_string(offset) +
                                                       " + length " + std::to_string(length) + " overflows");
    }
    out.offset = offset;
    out.length = length;
    return out;
}

} // namespace

ByteRange decode_read_call(const canopy::remote::v1::ReadCall& call) {
    return decode_range(call.buffer(), call.offset(), call.length(), "read");
}

ByteRange decode_write_head(const ChunkLayout& chunk) {
    const ByteRange range = decode_range(chunk.buffer, chunk.offset, chunk.length, "write");
    if (chunk.data_size > range.length) {
        throw RequestError(ErrorCode::BAD_REQUEST, "write.data: " + std::to_string(chunk.data_size) +
                                                       " bytes for a range of " + std::to_string(range.length));
    }
    return range;
}

ChunkLayout scan_chunk(google::protobuf::io::ZeroCopyInputStream& message, const char* stream) {
    using google::protobuf::internal::WireFormatLite;
    google::protobuf::io::CodedInputStream in(&message);
    const auto fail = [&](const std::string& what) {
        throw RequestError(ErrorCode::BAD_REQUEST, std::string(stream) + " chunk: " + what);
    };
    // A varint of at most `max_bytes` bytes. CodedInputStream reads longer ones than protobuf's own parser
    // takes (a tag or a length of up to 10 bytes, truncated); those are refused here, so that whatever this
    // accepts, protobuf reads the same.
    const auto varint = [&](int max_bytes, std::uint64_t& v) {
        const int at = in.CurrentPosition();
        return in.ReadVarint64(&v) && in.CurrentPosition() - at <= max_bytes;
    };
    const auto value = [&](int field) {
        std::uint64_t v = 0;
        if (!varint(10, v)) {
            fail("field " + std::to_string(field) + " is cut short");
        }
        return v;
    };
    // A length-delimited field's length, checked against `limit` before anything is read.
    const auto length = [&](int field, std::uint64_t limit, const char* name) {
        std::uint64_t n = 0;
        if (!varint(5, n)) {
            fail("field " + std::to_string(field) + " is cut short");
        }
        if (n > limit) {
            fail(std::string(name) + ": " + std::to_string(n) + " bytes; at most " + std::to_string(limit));
        }
        return static_cast<int>(n);
    };
    const auto text = [&](int field, std::uint64_t limit, const char* name, std::string& into) {
        const int n = length(field, limit, name);
        if (!in.ReadString(&into, n)) {
            fail(std::string(name) + " is cut short");
        }
    };
    ChunkLayout out;
    bool data_seen = false;
    for (;;) {
        const void* rest = nullptr;
        int rest_size = 0;
        if (!in.GetDirectBufferPointer(&rest, &rest_size)) {
            return out; // the end of the message
        }
        std::uint64_t tag = 0;
        if (!varint(5, tag) || tag > UINT32_MAX ||
            WireFormatLite::GetTagFieldNumber(static_cast<std::uint32_t>(tag)) == 0) {
            fail("a field tag that is not valid");
        }
        const int field = WireFormatLite::GetTagFieldNumber(static_cast<std::uint32_t>(tag));
        const auto type = WireFormatLite::GetTagWireType(static_cast<std::uint32_t>(tag));
        const auto expect = [&](WireFormatLite::WireType want) {
            if (type != want) {
                fail("field " + std::to_string(field) + " has wire type " + std::to_string(type) + ", not " +
                     std::to_string(want));
            }
        };
        switch (field) {
        case 1:
            expect(WireFormatLite::WIRETYPE_VARINT);
            out.session = value(field);
            break;
        case 2:
            expect(WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
            text(field, 64, "buffer", out.buffer);
            break;
        case 3:
            expect(WireFormatLite::WIRETYPE_VARINT);
            out.offset = value(field);
            break;
        case 4:
            expect(WireFormatLite::WIRETYPE_VARINT);
            out.length = value(field);
            break;
        case 5: {
            expect(WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
            if (data_seen) {
                fail("data: a second data field");
            }
            data_seen = true;
            const int n = length(field, MAX_CHUNK_BYTES, "data");
            out.data_at = static_cast<std::uint64_t>(in.CurrentPosition());
            out.data_size = static_cast<std::uint64_t>(n);
            if (!in.Skip(n)) {
                fail("data is cut short: " + std::to_string(n) + " bytes announced");
            }
            break;
        }
        case 6:
            expect(WireFormatLite::WIRETYPE_VARINT);
            out.code = static_cast<std::uint32_t>(value(field));
            break;
        case 7:
            expect(WireFormatLite::WIRETYPE_LENGTH_DELIMITED);
            text(field, MAX_CHUNK_MESSAGE_BYTES, "message", out.message);
            if (!google::protobuf::internal::IsStructurallyValidUTF8(out.message.data(),
                                                                     static_cast<int>(out.message.size()))) {
                fail("message is not UTF-8"); // a string field: protobuf's own parse refuses it too
            }
            break;
        default: {
            // A field of a later Chunk: skipped. Groups, which proto3 has none of, are refused.
            bool skipped = false;
            std::uint64_t ignored = 0;
            switch (type) {
            case WireFormatLite::WIRETYPE_VARINT:
                skipped = varint(10, ignored);
                break;
            case WireFormatLite::WIRETYPE_FIXED64:
                skipped = in.Skip(8);
                break;
            case WireFormatLite::WIRETYPE_LENGTH_DELIMITED:
                skipped = in.Skip(length(field, INT32_MAX, "an unknown field"));
                break;
            case WireFormatLite::WIRETYPE_FIXED32:
                skipped = in.Skip(4);
                break;
            default:
                fail("field " + std::to_string(field) + " has wire type " + std::to_string(type) +
                     ", which a Chunk does not take");
            }
            if (!skipped) {
                fail("field " + std::to_string(field) + " is cut short");
            }
        }
        }
    }
}

void copy_chunk_data(google::protobuf::io::ZeroCopyInputStream& message, const ChunkLayout& layout, std::byte* to) {
    if (layout.data_size == 0) {
        return;
    }
    google::protobuf::io::CodedInputStream in(&message);
    if (!in.Skip(static_cast<int>(layout.data_at)) || !in.ReadRaw(to, static_cast<int>(layout.data_size))) {
        throw RequestError(ErrorCode::BAD_REQUEST,
                           "chunk: its data ended before " + std::to_string(layout.data_size) + " bytes");
    }
}

void check_range(const ByteRange& range, std::uint64_t nbytes) {
    if (range.offset > nbytes || range.length > nbytes - range.offset) {
        throw RequestError(ErrorCode::BAD_REQUEST, std::to_string(range.length) + " bytes at offset " +
                                                       std::to_string(range.offset) + " run past the end of the " +
                                                       std::to_string(nbytes) + "-byte buffer");
    }
}

std::string remote_buffer_hex(std::string_view descriptor_bytes) {
    static constexpr char DIGITS[] = "0123456789abcdef";
    std::string out;
    out.reserve(descriptor_bytes.size() * 2);
    for (const char c : descriptor_bytes) {
        const auto b = static_cast<unsigned char>(c);
        out += DIGITS[b >> 4];
        out += DIGITS[b & 0xf];
    }
    return out;
}

BufferDescriptor remote_buffer_descriptor(std::string_view hex, const std::string& host) {
    const auto refuse = [&](const std::string& why) {
        return RequestError(ErrorCode::INVALID_DESCRIPTOR, "the buffer " + host + " created: " + why);
    };
    BufferDescriptor d{};
    if (hex.size() != 2 * sizeof d) {
        throw refuse(std::to_string(hex.size()) + " hex digits for a " + std::to_string(sizeof d) + "-byte descriptor");
    }
    const auto nibble = [&](char c) -> unsigned {
        if (c >= '0' && c <= '9') {
            return static_cast<unsigned>(c - '0');
        }
        if (c >= 'a' && c <= 'f') {
            return static_cast<unsigned>(c - 'a' + 10);
        }
        throw refuse("a descriptor that is not hex");
    };
    auto* bytes = reinterpret_cast<unsigned char*>(&d);
    for (std::size_t i = 0; i < sizeof d; ++i) {
        bytes[i] = static_cast<unsigned char>(nibble(hex[2 * i]) << 4 | nibble(hex[2 * i + 1]));
    }
    try {
        validate_descriptor(d);
    } catch (const WireError& e) {
        throw refuse(e.what());
    }
    return d;
}

std::optional<std::string> hello_refusal(const canopy::remote::v1::Hello& hello, std::uint32_t protocol) {
    if (hello.protocol() != protocol) {
        return "speaks remote protocol " + std::to_string(hello.protocol()) + ", this L4 " + std::to_string(protocol);
    }
    if (hello.session() == 0) {
        return "names session 0";
    }
    if (hello.owner_instance().size() != sizeof(CanonicalIdentity::owner_instance)) {
        return "holds a buffer owner nonce of " + std::to_string(hello.owner_instance().size()) + " bytes, not " +
               std::to_string(sizeof(CanonicalIdentity::owner_instance));
    }
    if (hello.owner_instance().find_first_not_of('\0') == std::string::npos) {
        return "holds an all-zero buffer owner nonce";
    }
    return std::nullopt;
}

} // namespace canopy::daemon
