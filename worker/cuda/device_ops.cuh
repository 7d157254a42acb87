#pragma once
// Per-dtype element operations of the CUDA kernels, the device twins of worker/kernels/detail/element_ops.h.
// Each gives the same bits as its CPU twin:
//   V                 the stored type (raw bits for float16 / bfloat16)
//   from_index(i)     a logical index converted to the dtype (u64 -> double -> dtype; integers saturate)
//   mul, add          one operation rounded once in the dtype (integers wrap modulo 2^bits)
//   Acc, to_acc, acc_add, from_acc   the reduce_sum accumulator: double for floats, wrapping uint64 for ints
//   Wide, widen, wmul, wadd, narrow  the matmul accumulator: float, double for float64
// Float arithmetic uses the _rn intrinsics, which nvcc never fuses into a multiply-add, and the file is built
// with -fmad=false -ftz=false: subnormals are kept.

#include "worker/cuda/device_math.h"

#include <cstdint>

namespace canopy::worker::cuda_kernels {

struct Float32Ops {
    using V = float;
    using Acc = double;
    using Wide = float;
    __device__ static V from_index(std::uint64_t i) { return __double2float_rn(__ull2double_rn(i)); }
    __device__ static V mul(V a, V b) { return __fmul_rn(a, b); }
    __device__ static V add(V a, V b) { return __fadd_rn(a, b); }
    __device__ static Acc to_acc(V v) { return static_cast<double>(v); }
    __device__ static Acc acc_add(Acc acc, Acc v) { return __dadd_rn(acc, v); }
    __device__ static V from_acc(Acc acc) { return __double2float_rn(acc); }
    __device__ static Wide widen(V v) { return v; }
    __device__ static Wide wmul(Wide a, Wide b) { return __fmul_rn(a, b); }
    __device__ static Wide wadd(Wide a, Wide b) { return __fadd_rn(a, b); }
    __device__ static V narrow(Wide w) { return w; }
};

struct Float64Ops {
    using V = double;
    using Acc = double;
    using Wide = double;
    __device__ static V from_index(std::uint64_t i) { return __ull2double_rn(i); }
    __device__ static V mul(V a, V b) { return __dmul_rn(a, b); }
    __device__ static V add(V a, V b) { return __dadd_rn(a, b); }
    __device__ static Acc to_acc(V v) { return v; }
    __device__ static Acc acc_add(Acc acc, Acc v) { return __dadd_rn(acc, v); }
    __device__ static V from_acc(Acc acc) { return acc; }
    __device__ static Wide widen(V v) { return v; }
    __device__ static Wide wmul(Wide a, Wide b) { return __dmul_rn(a, b); }
    __device__ static Wide wadd(Wide a, Wide b) { return __dadd_rn(a, b); }
    __device__ static V narrow(Wide w) { return w; }
};

// float16 / bfloat16: multiply and add in double (exact operands), one rounding to 16 bits, as the CPU does.
template <class Format>
struct Bits16Ops {
    using V = std::uint16_t;
    using Acc = double;
    using Wide = float;
    __device__ static float to_float(V v) {
        if constexpr (Format::FRACTION_BITS == cuda_math::Float16Format::FRACTION_BITS) {
            return cuda_math::float16_to_float(v);
        } else {
            return cuda_math::bfloat16_to_float(v);
        }
    }
    __device__ static double to_double(V v) { return static_cast<double>(to_float(v)); }
    __device__ static V from_double(double d) { return cuda_math::narrow16<Format>(d); }
    __device__ static V from_index(std::uint64_t i) { return from_double(__ull2double_rn(i)); }
    __device__ static V mul(V a, V b) { return from_double(__dmul_rn(to_double(a), to_double(b))); }
    __device__ static V add(V a, V b) { return from_double(__dadd_rn(to_double(a), to_double(b))); }
    __device__ static Acc to_acc(V v) { return to_double(v); }
    __device__ static Acc acc_add(Acc acc, Acc v) { return __dadd_rn(acc, v); }
    __device__ static V from_acc(Acc acc) { return from_double(acc); }
    __device__ static Wide widen(V v) { return to_float(v); }
    __device__ static Wide wmul(Wide a, Wide b) { return __fmul_rn(a, b); }
    __device__ static Wide wadd(Wide a, Wide b) { return __fadd_rn(a, b); }
    __device__ static V narrow(Wide w) { return from_double(static_cast<double>(w)); }
};

using Float16Ops = Bits16Ops<cuda_math::Float16Format>;
using BFloat16Ops = Bits16Ops<cuda_math::BFloat16Format>;

// Integers compute in uint64 and keep the low bits: two's complement wrap-around without signed overflow.
template <class I, I MAX>
struct IntOps {
    using V = I;
    using Acc = std::uint64_t;
    __device__ static std::uint64_t bits(V v) { return static_cast<std::uint64_t>(static_cast<std::int64_t>(v)); }
    __device__ static V from_index(std::uint64_t i) {
        return i > static_cast<std::uint64_t>(MAX) ? MAX : static_cast<V>(i);
    }
    __device__ static V mul(V a, V b) { return static_cast<V>(bits(a) * bits(b)); }
    __device__ static V add(V a, V b) { return static_cast<V>(bits(a) + bits(b)); }
    __device__ static Acc to_acc(V v) { return bits(v); }
    __device__ static Acc acc_add(Acc acc, Acc v) { return acc + v; }
    __device__ static V from_acc(Acc acc) { return static_cast<V>(acc); }
};

using Int8Ops = IntOps<std::int8_t, INT8_MAX>;
using UInt8Ops = IntOps<std::uint8_t, UINT8_MAX>;
using Int16Ops = IntOps<std::int16_t, INT16_MAX>;
using Int32Ops = IntOps<std::int32_t, INT32_MAX>;
using Int64Ops = IntOps<std::int64_t, INT64_MAX>;

template <class V>
__device__ __forceinline__ V load(std::uint64_t address) {
    return *reinterpret_cast<const V*>(address);
}

template <class V>
__device__ __forceinline__ void store(std::uint64_t address, V v) {
    *reinterpret_cast<V*>(address) = v;
}

// The address of element i of a view.
__device__ __forceinline__ std::uint64_t element_address(const cuda_abi::DeviceView& v, std::uint64_t i) {
    return v.origin + cuda_math::element_offset(v, i);
}

} // namespace canopy::worker::cuda_kernels
