#include "daemon/remote_call.h"

#include "protocol/task_args.h"
#include "remote/canopy_remote.pb.h"

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
