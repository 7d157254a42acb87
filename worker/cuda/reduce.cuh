#pragma once
// reduce_sum as a two-pass tree: reduce_partial (or reduce_dense) leaves one sum per block in `partials`,
// reduce_finish (one block) adds the partials and stores the result. Both accumulate in the CPU's accumulator
// (device_ops.cuh Acc): double for float dtypes (each element widened exactly), wrapping uint64 for integers.
//
// Which element each thread adds, and in what order partial sums meet, depends only on the element count, the
// view's origin modulo 16 and the launch geometry the host derives from them (kernel_abi.h): there are no
// atomics, so a task run twice gives the same bits. Integer sums are exact whatever the order (wrapping 64-bit
// addition is associative and commutative), so they equal the CPU's bit for bit. Float sums associate
// differently from the CPU's sequential sum; docs/kernels.md bounds the difference.
//
//   reduce_partial  any view: thread t of T adds elements t, t + T, t + 2T, ... (element_address)
//   reduce_dense    a contiguous view: the elements before the first 16-byte boundary (head) go to threads
//                   0.., then thread t adds 16-byte vectors t, t + T, ... REDUCE_UNROLL loads at a time, then the
//                   elements after the last whole vector (tail) go to threads 0..
// Each block then adds its threads' sums over a fixed tree (warp shuffles, then the block's warps).

#include "worker/cuda/device_ops.cuh"

namespace canopy::worker::cuda_kernels {

inline constexpr unsigned WARP = 32;
inline constexpr unsigned REDUCE_WARPS = cuda_abi::REDUCE_BLOCK / WARP;
static_assert(cuda_abi::REDUCE_BLOCK % WARP == 0 && REDUCE_WARPS <= WARP);

// The sum of `value` over the block, valid in thread 0. REQUIRES blockDim.x == REDUCE_BLOCK; every thread calls it.
template <class Ops>
__device__ __forceinline__ typename Ops::Acc block_reduce(typename Ops::Acc value) {
    using Acc = typename Ops::Acc;
    __shared__ Acc warp_sums[REDUCE_WARPS];
    for (unsigned offset = WARP / 2; offset > 0; offset /= 2) {
        value = Ops::acc_add(value, __shfl_down_sync(0xffffffffu, value, offset));
    }
    const unsigned lane = threadIdx.x % WARP;
    const unsigned warp = threadIdx.x / WARP;
    if (lane == 0) {
        warp_sums[warp] = value;
    }
    __syncthreads();
    if (warp == 0) {
        value = lane < REDUCE_WARPS ? warp_sums[lane] : Acc(0);
        for (unsigned offset = WARP / 2; offset > 0; offset /= 2) {
            value = Ops::acc_add(value, __shfl_down_sync(0xffffffffu, value, offset));
        }
    }
    return value;
}

template <class Ops>
__device__ __forceinline__ void store_partial(const cuda_abi::ReduceParams& p, typename Ops::Acc sum) {
    if (threadIdx.x == 0) {
        store<typename Ops::Acc>(p.partials + 8 * static_cast<std::uint64_t>(blockIdx.x), sum);
    }
}

template <class Ops>
__device__ void reduce_partial_body(const cuda_abi::ReduceParams& p) {
    using V = typename Ops::V;
    typename Ops::Acc acc(0);
    const std::uint64_t threads = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    for (std::uint64_t i = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < p.x.count;
         i += threads) {
        acc = Ops::acc_add(acc, Ops::to_acc(load<V>(element_address(p.x, i))));
    }
    store_partial<Ops>(p, block_reduce<Ops>(acc));
}

// Adds the elements of one 16-byte vector in address order.
template <class Ops>
__device__ __forceinline__ typename Ops::Acc add_vector(typename Ops::Acc acc, const uint4& raw) {
    using V = typename Ops::V;
    constexpr unsigned PER = 16 / sizeof(V);
    V e[PER];
    memcpy(e, &raw, 16);
#pragma unroll
    for (unsigned q = 0; q < PER; ++q) {
        acc = Ops::acc_add(acc, Ops::to_acc(e[q]));
    }
    return acc;
}

// REQUIRES: address is a multiple of 16.
__device__ __forceinline__ uint4 load_vector(std::uint64_t address) {
    return *reinterpret_cast<const uint4*>(address);
}

// REQUIRES: p.x is one dimension of stride element_size (a contiguous view) and its origin is a multiple of the
// element size.
template <class Ops>
__device__ void reduce_dense_body(const cuda_abi::ReduceParams& p) {
    using V = typename Ops::V;
    constexpr std::uint64_t SIZE = sizeof(V);
    const std::uint64_t origin = p.x.origin;
    const std::uint64_t count = p.x.count;
    const cuda_math::VectorSplit split = cuda_math::vector_split(origin, count, SIZE);
    const std::uint64_t head = split.head;
    const std::uint64_t vectors = split.vectors;
    const std::uint64_t tail = split.tail_start;
    const std::uint64_t body = origin + head * SIZE;
    const std::uint64_t threads = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
    const std::uint64_t t = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
    typename Ops::Acc acc(0);
    if (t < head) {
        acc = Ops::acc_add(acc, Ops::to_acc(load<V>(origin + t * SIZE)));
    }
    constexpr unsigned UNROLL = cuda_abi::REDUCE_UNROLL;
    std::uint64_t j = t;
    // UNROLL loads in flight per thread, then their elements added in address order of each vector.
    for (; j + (UNROLL - 1) * threads < vectors; j += UNROLL * threads) {
        uint4 r[UNROLL];
#pragma unroll
        for (unsigned u = 0; u < UNROLL; ++u) {
            r[u] = load_vector(body + 16 * (j + u * threads));
        }
#pragma unroll
        for (unsigned u = 0; u < UNROLL; ++u) {
            acc = add_vector<Ops>(acc, r[u]);
        }
    }
    for (; j < vectors; j += threads) {
        acc = add_vector<Ops>(acc, load_vector(body + 16 * j));
    }
    if (t < count - tail) {
        acc = Ops::acc_add(acc, Ops::to_acc(load<V>(origin + (tail + t) * SIZE)));
    }
    store_partial<Ops>(p, block_reduce<Ops>(acc));
}

template <class Ops>
__device__ void reduce_finish_body(const cuda_abi::ReduceParams& p) {
    using Acc = typename Ops::Acc;
    Acc acc(0);
    for (unsigned j = threadIdx.x; j < p.partial_count; j += blockDim.x) {
        acc = Ops::acc_add(acc, load<Acc>(p.partials + 8 * static_cast<std::uint64_t>(j)));
    }
    const Acc sum = block_reduce<Ops>(acc);
    if (threadIdx.x == 0) {
        store<typename Ops::V>(p.y, Ops::from_acc(sum));
    }
}

} // namespace canopy::worker::cuda_kernels
