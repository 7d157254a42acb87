#pragma once
// invalid_tensor: how the decoders of tensors and of the TaskArgs blob refuse what they read. Internal to
// protocol/.

#include "protocol/error.h"

#include <string>

namespace canopy::detail {

// Throws WireError(INVALID_TENSOR) naming `field` and `problem`.
[[noreturn]] inline void invalid_tensor(const std::string& field, const std::string& problem) {
    throw WireError(ErrorCode::INVALID_TENSOR, field, problem);
}

} // namespace canopy::detail
