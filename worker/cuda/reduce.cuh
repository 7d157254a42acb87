#pragma once
// reduce_sum.
//
// Float dtypes: the sum is sequential by contract (acc = acc + (double)x_i for i ascending, from +0), and
// floating-point addition does not reassociate, so one block computes it: its threads stage REDUCE_TILE
// elements at a time in shared memory (converted to double, which is exact), then thread 0 adds them in
// order. The cost is one dependent double addition per element, a few nanoseconds each: about 0.2-0.5 s per
// 10^8 elements, whatever the GPU. The result is bit-identical to the CPU's.
//
// Integer dtypes: the wrapping 64-bit sum is associative and commutative, so any order gives the same bits.
// reduce_partial sums a grid-stride share per thread, a tree per block, one partial per block; reduce_finish
// (one block) adds the partials and stores the low bits.

#include "worker/cuda/device_ops.cuh"

namespace canopy::worker::cuda_kernels {

template <class Ops>
__device__ void reduce_ordered_body(const cuda_abi::ReduceParams& p) {
    using V = typename Ops::V;
    __shared__ double tile[cuda_abi::REDUCE_TILE];
    double acc = 0.0;
    for (std::uint64_t start = 0; start < p.x.count; start += cuda_abi::REDUCE_TILE) {
        const std::uint64_t left = p.x.count - start;
        const unsigned n = left < cuda_abi::REDUCE_TILE ? static_cast<unsigned>(left) : cuda_abi::REDUCE_TILE;
        for (unsigned j = threadIdx.x; j < n; j += blockDim.x) {
            tile[j] = Ops::to_acc(load<V>(element_address(p.x, start + j)));
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            for (unsigned j = 0; j < n; ++j) {
                acc = Ops::acc_add(acc, tile[j]);
            }
        }
        __syncthreads();
    }
    if (threadIdx.x == 0) {
        store<V>(p.y, Ops::from_acc(acc));
    }
}

// Sums `value` over the block; the result is valid in thread 0. REQUIRES blockDim.x == REDUCE_BLOCK.
__device__ __forceinline__ std::uint64_t block_sum(std::uint64_t value) {
    __shared__ std::uint64_t sums[cuda_abi::REDUCE_BLOCK];
    sums[threadIdx.x] = value;
    __syncthreads();
    for (unsigned half = cuda_abi::REDUCE_BLOCK / 2; half > 0; half /= 2) {
        if (threadIdx.x < half) {
            sums[threadIdx.x] += sums[threadIdx.x + half];
        }
        __syncthreads();
    }
    return sums[0];
}

template <class Ops>
__device__ void reduce_partial_body(const cuda_abi::ReduceParams& p) {
    using V = typename Ops::V;
    std::uint64_t acc = 0;
    const std::uint64_t stride = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.x.count;
         i += stride) {
        acc = Ops::acc_add(acc, Ops::to_acc(load<V>(element_address(p.x, i))));
    }
    const std::uint64_t sum = block_sum(acc);
    if (threadIdx.x == 0) {
        store<std::uint64_t>(p.partials + 8 * static_cast<std::uint64_t>(blockIdx.x), sum);
    }
}

template <class Ops>
__device__ void reduce_finish_body(const cuda_abi::ReduceParams& p) {
    using V = typename Ops::V;
    std::uint64_t acc = 0;
    for (unsigned j = threadIdx.x; j < p.partial_count; j += blockDim.x) {
        acc += load<std::uint64_t>(p.partials + 8 * static_cast<std::uint64_t>(j));
    }
    const std::uint64_t sum = block_sum(acc);
    if (threadIdx.x == 0) {
        store<V>(p.y, Ops::from_acc(sum));
    }
}

} // namespace canopy::worker::cuda_kernels
