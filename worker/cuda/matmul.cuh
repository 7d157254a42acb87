#pragma once
// matmul: C[M,N] = A[M,K] · B[K,N] over 2-D views with arbitrary strides, tiled over m and n. A cuda chip runs it
// where cuBLASLt does not (views that fit no cuBLASLt layout, a chip without cuBLASLt: lt_matmul.h).
//
// Each thread owns one C element. Per step, a block stages a MATMUL_TILE x MATMUL_TILE tile of A and of B in
// shared memory, widened to the accumulation type, then every thread adds its products for that tile's k in
// ascending order; tiles run in ascending k. So each element is acc = +0, then acc = acc + A[m,k]·B[k,n] for
// k = 0..K-1 in order, the product and the sum each rounded (no fused multiply-add), then one narrowing:
// exactly docs/kernels.md's order, and the CPU's bits. Only k < K is ever added (no padding terms).
// Blocks walk the tile grid in grid-stride loops, so any M and N fit the launch limits.

#include "worker/cuda/device_ops.cuh"

namespace canopy::worker::cuda_kernels {

__device__ __forceinline__ std::uint64_t matrix_address(const cuda_abi::MatrixView& v, std::uint64_t i,
                                                        std::uint64_t j) {
    return v.origin + i * v.row_stride + j * v.col_stride;
}

template <class Ops>
__device__ void matmul_body(const cuda_abi::MatmulParams& p) {
    using V = typename Ops::V;
    using W = typename Ops::Wide;
    constexpr unsigned T = cuda_abi::MATMUL_TILE;
    __shared__ W a_tile[T][T + 1];
    __shared__ W b_tile[T][T + 1];
    const unsigned tx = threadIdx.x;
    const unsigned ty = threadIdx.y;
    const std::uint64_t rows = p.a.rows;
    const std::uint64_t depth = p.a.cols;
    const std::uint64_t cols = p.b.cols;
    const std::uint64_t tile_rows = (rows + T - 1) / T;
    const std::uint64_t tile_cols = (cols + T - 1) / T;
    for (std::uint64_t tm = blockIdx.y; tm < tile_rows; tm += gridDim.y) {
        for (std::uint64_t tn = blockIdx.x; tn < tile_cols; tn += gridDim.x) {
            const std::uint64_t m = tm * T + ty;
            const std::uint64_t n = tn * T + tx;
            W acc = W(0);
            for (std::uint64_t k0 = 0; k0 < depth; k0 += T) {
                const std::uint64_t left = depth - k0;
                const unsigned kn = left < T ? static_cast<unsigned>(left) : T;
                a_tile[ty][tx] = (m < rows && tx < kn) ? Ops::widen(load<V>(matrix_address(p.a, m, k0 + tx))) : W(0);
                b_tile[ty][tx] = (ty < kn && n < cols) ? Ops::widen(load<V>(matrix_address(p.b, k0 + ty, n))) : W(0);
                __syncthreads();
                for (unsigned kk = 0; kk < kn; ++kk) {
                    acc = Ops::wadd(acc, Ops::wmul(a_tile[ty][kk], b_tile[kk][tx]));
                }
                __syncthreads();
            }
            if (m < rows && n < cols) {
                store<V>(matrix_address(p.c, m, n), Ops::narrow(acc));
            }
        }
    }
}

} // namespace canopy::worker::cuda_kernels
