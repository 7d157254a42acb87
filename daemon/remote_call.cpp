#include "daemon/remote_call.h"

#include "protocol/task_args.h"
#include "remote/canopy_remote.pb.h"

#include <algorithm>
#include <cstring>
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

ByteRange decode_write_head(const canopy::remote::v1::Chunk& chunk) {
    const ByteRange range = decode_range(chunk.buffer(), chunk.offset(), chunk.length(), "write");
    if (chunk.data().size() > MAX_CHUNK_BYTES) {
        throw RequestError(ErrorCode::BAD_REQUEST, "write.data: " + std::to_string(chunk.data().size()) +
                                                       " bytes in one chunk; at most " +
                                                       std::to_string(MAX_CHUNK_BYTES));
    }
    if (chunk.data().size() > range.length) {
        throw RequestError(ErrorCode::BAD_REQUEST, "write.data: " + std::to_string(chunk.data().size()) +
                                                       " bytes for a range of " + std::to_string(range.length));
    }
    return range;
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

} // namespace canopy::daemon
