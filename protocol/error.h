#pragma once
// Error codes of the public surface (docs/protocol.md) and WireError, the exception thrown by every
// validation gate of the wire ABI.
//
// Thread safety: all functions are pure and may be called from any thread.

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>

namespace canopy {

// Values are stable: they travel in mailbox result areas. 0 means "no error".
enum class ErrorCode : std::uint16_t {
    OK = 0,
    INVALID_TENSOR = 1,
    INVALID_DESCRIPTOR = 2,
    UNKNOWN_BUFFER = 3,
    STALE_BUFFER = 4,
    ACCESS_DENIED = 5,
    OVERLAPPING_WRITES = 6,
    UNREACHABLE_BUFFER = 7,
    PE_OUT_OF_RANGE = 8,
    UNKNOWN_KERNEL = 9,
    UNKNOWN_WORKER = 10,
    NO_CONSUMER = 11,
    WORKER_DIED = 12,
    KERNEL_FAILED = 13,
    TIMEOUT = 14,
    DEPENDENCY_FAILED = 15,
    BAD_REQUEST = 16,
    UNAUTHORIZED = 17,
    CANCELLED = 18,
};

inline constexpr std::uint16_t ERROR_CODE_MAX = 18;

// The spelling used on the control socket and by the CLI ("INVALID_TENSOR"). "OK" for ErrorCode::OK.
std::string_view error_code_name(ErrorCode code) noexcept;

// Inverse of error_code_name; nullopt for any other spelling.
std::optional<ErrorCode> error_code_from_name(std::string_view name) noexcept;

// Thrown by validate_descriptor, validate_tensor, decode_task_args, encode_task_args and the identity
// parser. what() is "FIELD: PROBLEM", e.g. "args[1].strides[0]: stride must be > 0"; field() returns the
// FIELD part alone.
class WireError : public std::invalid_argument {
public:
    WireError(ErrorCode code, std::string field, const std::string& problem);

    ErrorCode code() const noexcept { return code_; }
    const std::string& field() const noexcept { return field_; }
    // The PROBLEM part of what(), without the field.
    const std::string& problem() const noexcept { return problem_; }

private:
    ErrorCode code_;
    std::string field_;
    std::string problem_;
};

} // namespace canopy
