// canopy's built-in kernels for cuda chips, compiled by nvcc into a fatbin (sm_90 code plus compute_90 PTX)
// that the build embeds into canopy_worker and cuda chips load with cuModuleLoadData. Every entry point is
// extern "C" so the host finds it by the name kernel_abi.h documents; each takes one parameter struct by
// value. The semantics are docs/kernels.md's: bit for bit, except float reduce_sum, whose tree order differs from
// the CPU's within the bound docs/kernels.md states (see device_ops.cuh, reduce.cuh, matmul.cuh). Each parameter
// struct is __grid_constant__: the bodies take it by reference, and a function that is not inlined
// (cuda_math::element_offset_wide) reads it in place, with no per-thread copy in local memory.
#include "worker/cuda/elementwise.cuh"
#include "worker/cuda/elementwise_vector.cuh"
#include "worker/cuda/matmul.cuh"
#include "worker/cuda/peer.cuh"
#include "worker/cuda/reduce.cuh"

using namespace canopy::worker::cuda_abi;
using namespace canopy::worker::cuda_kernels;

#define CANOPY_ELEMENTWISE_KERNEL(kernel, dtype, Ops)                                                                  \
    extern "C" __global__ void __launch_bounds__(ELEMENTWISE_BLOCK)                                                    \
        canopy_##kernel##_##dtype(const __grid_constant__ ElementwiseParams p) {                                       \
        kernel##_body<Ops>(p);                                                                                         \
    }

#define CANOPY_COPY_KERNEL(kernel, dtype, Bits)                                                                        \
    extern "C" __global__ void __launch_bounds__(ELEMENTWISE_BLOCK)                                                    \
        canopy_##kernel##_##dtype(const __grid_constant__ ElementwiseParams p) {                                       \
        kernel##_body<Bits>(p);                                                                                        \
    }

#define CANOPY_REDUCE_KERNEL(kernel, dtype, Ops)                                                                       \
    extern "C" __global__ void __launch_bounds__(REDUCE_BLOCK, REDUCE_MIN_BLOCKS_PER_SM)                               \
        canopy_##kernel##_##dtype(const __grid_constant__ ReduceParams p) {                                            \
        kernel##_body<Ops>(p);                                                                                         \
    }

#define CANOPY_ELEMENTWISE_KERNELS(dtype, Ops, Bits)                                                                   \
    CANOPY_ELEMENTWISE_KERNEL(fill, dtype, Ops)                                                                        \
    CANOPY_ELEMENTWISE_KERNEL(iota, dtype, Ops)                                                                        \
    CANOPY_ELEMENTWISE_KERNEL(scale, dtype, Ops)                                                                       \
    CANOPY_ELEMENTWISE_KERNEL(axpy, dtype, Ops)                                                                        \
    CANOPY_COPY_KERNEL(copy, dtype, Bits)                                                                              \
    CANOPY_ELEMENTWISE_KERNEL(fill_vector, dtype, Ops)                                                                 \
    CANOPY_ELEMENTWISE_KERNEL(iota_vector, dtype, Ops)                                                                 \
    CANOPY_ELEMENTWISE_KERNEL(scale_vector, dtype, Ops)                                                                \
    CANOPY_ELEMENTWISE_KERNEL(axpy_vector, dtype, Ops)                                                                 \
    CANOPY_COPY_KERNEL(copy_vector, dtype, Bits)                                                                       \
    CANOPY_REDUCE_KERNEL(reduce_partial, dtype, Ops)                                                                   \
    CANOPY_REDUCE_KERNEL(reduce_dense, dtype, Ops)                                                                     \
    CANOPY_REDUCE_KERNEL(reduce_finish, dtype, Ops)

#define CANOPY_FLOAT_KERNELS(dtype, Ops, Bits)                                                                         \
    CANOPY_ELEMENTWISE_KERNELS(dtype, Ops, Bits)                                                                       \
    extern "C" __global__ void __launch_bounds__(MATMUL_TILE* MATMUL_TILE)                                             \
        canopy_matmul_##dtype(const __grid_constant__ MatmulParams p) {                                                \
        matmul_body<Ops>(p);                                                                                           \
    }

#define CANOPY_INT_KERNELS(dtype, Ops, Bits) CANOPY_ELEMENTWISE_KERNELS(dtype, Ops, Bits)

CANOPY_FLOAT_KERNELS(float32, Float32Ops, std::uint32_t)
CANOPY_FLOAT_KERNELS(float64, Float64Ops, std::uint64_t)
CANOPY_FLOAT_KERNELS(float16, Float16Ops, std::uint16_t)
CANOPY_FLOAT_KERNELS(bfloat16, BFloat16Ops, std::uint16_t)
CANOPY_INT_KERNELS(int8, Int8Ops, std::uint8_t)
CANOPY_INT_KERNELS(uint8, UInt8Ops, std::uint8_t)
CANOPY_INT_KERNELS(int16, Int16Ops, std::uint16_t)
CANOPY_INT_KERNELS(int32, Int32Ops, std::uint32_t)
CANOPY_INT_KERNELS(int64, Int64Ops, std::uint64_t)

#define CANOPY_PEER_KERNELS(bytes, Bits)                                                                               \
    extern "C" __global__ void __launch_bounds__(ELEMENTWISE_BLOCK)                                                    \
        canopy_peer_read_b##bytes(const __grid_constant__ PeerParams p) {                                              \
        peer_read_body<Bits>(p);                                                                                       \
    }                                                                                                                  \
    extern "C" __global__ void __launch_bounds__(ELEMENTWISE_BLOCK)                                                    \
        canopy_allgather_b##bytes(const __grid_constant__ PeerParams p) {                                              \
        allgather_body<Bits>(p);                                                                                       \
    }

CANOPY_PEER_KERNELS(1, std::uint8_t)
CANOPY_PEER_KERNELS(2, std::uint16_t)
CANOPY_PEER_KERNELS(4, std::uint32_t)
CANOPY_PEER_KERNELS(8, std::uint64_t)

// Does nothing: the cheapest launch, for liveness checks and tests.
extern "C" __global__ void canopy_noop() {}

// Stores through an address no allocation covers; the launch fails with CUDA_ERROR_ILLEGAL_ADDRESS, which is
// sticky. Only reachable with fault kernels enabled.
extern "C" __global__ void canopy_illegal_address(const FaultParams p) {
    if (blockIdx.x == 0 && threadIdx.x == 0) {
        *reinterpret_cast<volatile unsigned*>(p.address) = 1u;
    }
}
