#pragma once
// Which entry point and grid an element-wise built-in (fill, iota, copy, scale, axpy) runs on, from its written
// view alone: the _vector kernel (16-byte loads and stores, elementwise_vector.cuh) when that view is contiguous
// (cuda_math::vectorizable), else the strided kernel (elementwise.cuh). Whether copy and axpy also read their
// input in 16-byte vectors (cuda_math::vectors_pair) is decided in the kernel from the same views.
//
// Thread safety: pure functions.

#include "worker/cuda/device_math.h"
#include "worker/cuda/kernel_abi.h"

#include <algorithm>
#include <cstdint>

namespace canopy::worker {

struct ElementwisePlan {
    bool vector;     // the _vector entry point
    unsigned blocks; // of cuda_abi::ELEMENTWISE_BLOCK threads
};

// Vector kernels: one block per ELEMENTWISE_BLOCK whole vectors, at least one (its first threads write the head
// and the tail), at most ELEMENTWISE_VECTOR_GRID. Strided kernels: one block per ELEMENTWISE_BLOCK elements, at
// most ELEMENTWISE_GRID.
inline ElementwisePlan plan_elementwise(const cuda_abi::DeviceView& out) noexcept {
    auto blocks = [](std::uint64_t units, std::uint64_t most) {
        const std::uint64_t per = cuda_abi::ELEMENTWISE_BLOCK;
        return static_cast<unsigned>(std::clamp<std::uint64_t>((units + per - 1) / per, 1, most));
    };
    if (cuda_math::vectorizable(out)) {
        const std::uint64_t vectors = cuda_math::vector_split(out.origin, out.count, out.element_size).vectors;
        return {true, blocks(vectors, cuda_abi::ELEMENTWISE_VECTOR_GRID)};
    }
    return {false, blocks(out.count, cuda_abi::ELEMENTWISE_GRID)};
}

} // namespace canopy::worker
