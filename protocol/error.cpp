#include "protocol/error.h"

#include <array>

namespace canopy {
namespace {

constexpr std::array<std::string_view, ERROR_CODE_MAX + 1> NAMES = {
    "OK",
    "INVALID_TENSOR",
    "INVALID_DESCRIPTOR",
    "UNKNOWN_BUFFER",
    "STALE_BUFFER",
    "ACCESS_DENIED",
    "OVERLAPPING_WRITES",
    "UNREACHABLE_BUFFER",
    "PE_OUT_OF_RANGE",
    "UNKNOWN_KERNEL",
    "UNKNOWN_WORKER",
    "NO_CONSUMER",
    "WORKER_DIED",
    "KERNEL_FAILED",
    "TIMEOUT",
    "DEPENDENCY_FAILED",
    "BAD_REQUEST",
    "UNAUTHORIZED",
    "CANCELLED",
};

} // namespace

std::string_view error_code_name(ErrorCode code) noexcept {
    const auto index = static_cast<std::size_t>(code);
    return index < NAMES.size() ? NAMES[index] : std::string_view{"UNKNOWN_ERROR"};
}

std::optional<ErrorCode> error_code_from_name(std::string_view name) noexcept {
    for (std::size_t i = 0; i < NAMES.size(); ++i) {
        if (NAMES[i] == name) {
            return static_cast<ErrorCode>(i);
        }
    }
    return std::nullopt;
}

WireError::WireError(ErrorCode code, std::string field, const std::string& problem)
    : std::invalid_argument(field.empty() ? problem : field + ": " + problem), code_(code), field_(std::move(field)),
      problem_(problem) {}

} // namespace canopy
