#pragma once
// KernelError: the exception thrown by check_builtin and run_builtin. It carries an ErrorCode of the public
// surface (protocol/error.h): BAD_REQUEST for a call whose arguments do not fit the kernel, UNKNOWN_KERNEL for
// a name the worker kind does not offer, PE_OUT_OF_RANGE for a PE index outside the world, KERNEL_FAILED for
// a worker-side inconsistency (a missing mapping, a malformed peer table). what() is "KERNEL: PROBLEM".
//
// Thread safety: plain value.

#include "protocol/error.h"

#include <stdexcept>
#include <string>

namespace canopy::kernels {

class KernelError : public std::runtime_error {
public:
    KernelError(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}

    ErrorCode code() const noexcept { return code_; }

private:
    ErrorCode code_;
};

} // namespace canopy::kernels
