#pragma once
// Host-side construction of the kernels' views (kernel_abi.h) from validated Tensors and the device address
// of their buffer.
//
// Thread safety: pure functions.

#include "protocol/tensor.h"
#include "worker/cuda/kernel_abi.h"

#include <cstdint>

namespace canopy::worker {

// The view in device bytes, dimensions dropped and merged as kernels::detail::byte_layout does (the same
// row-major element order). REQUIRES: view passed validate_tensor; device_base is the device address of byte 0
// of its buffer.
cuda_abi::DeviceView make_device_view(const Tensor& view, std::uint64_t device_base) noexcept;

// A 2-D view as a matrix. REQUIRES: view passed validate_tensor and has ndims == 2.
cuda_abi::MatrixView make_matrix_view(const Tensor& view, std::uint64_t device_base) noexcept;

} // namespace canopy::worker
