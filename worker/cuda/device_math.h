#pragma once
// Arithmetic the CUDA kernels need bit-exactly as the CPU kernels do it (docs/kernels.md), written once for
// both compilers: nvcc compiles it into the kernels, and the host C++ build compiles the same text so that
// tests compare it with worker/kernels/ on any machine, GPU or not.
//
//   narrow16<Format>(double)   double -> float16 / bfloat16 bits: one rounding to nearest even, subnormal
//                              results kept, overflow to infinity, sign of zero kept, every NaN -> 0x7FFF.
//                              The algorithm of worker/kernels/half.cpp, in integer operations only.
//   float16_to_float, bfloat16_to_float   exact widening
//   element_offset(view, i)    byte offset of element i of a DeviceView from its origin
//   vectorizable, vector_split, vectors_pair   which views the 16-byte vector kernels take and how they split
//
// Thread safety: pure functions.

#include "worker/cuda/kernel_abi.h"

#include <cstdint>
#if !defined(__CUDA_ARCH__)
#include <cstring>
#endif

#if defined(__CUDACC__)
#define CANOPY_HD __host__ __device__ __forceinline__
#else
#define CANOPY_HD inline
#endif

namespace canopy::worker::cuda_math {

inline constexpr std::uint16_t CANONICAL_NAN16 = 0x7FFF;

struct Float16Format {
    static constexpr int FRACTION_BITS = 10;
    static constexpr int MIN_EXPONENT = -14; // unbiased exponent of the smallest normal value
    static constexpr int MAX_EXPONENT = 15;  // unbiased exponent of the largest finite value
    static constexpr std::uint16_t INFINITY_BITS = 0x7C00;
};

struct BFloat16Format {
    static constexpr int FRACTION_BITS = 7;
    static constexpr int MIN_EXPONENT = -126;
    static constexpr int MAX_EXPONENT = 127;
    static constexpr std::uint16_t INFINITY_BITS = 0x7F80;
};

CANOPY_HD std::uint64_t bits_of(double v) {
#if defined(__CUDA_ARCH__)
    return static_cast<std::uint64_t>(__double_as_longlong(v));
#else
    std::uint64_t bits;
    std::memcpy(&bits, &v, sizeof bits);
    return bits;
#endif
}

CANOPY_HD float float_from_bits(std::uint32_t bits) {
#if defined(__CUDA_ARCH__)
    return __uint_as_float(bits);
#else
    float v;
    std::memcpy(&v, &bits, sizeof v);
    return v;
#endif
}

// Rounds `sig` (a 53-bit significand with its hidden bit) right by `shift` bits, to nearest, ties to even.
CANOPY_HD std::uint64_t round_shift(std::uint64_t sig, int shift) {
    if (shift <= 0) {
        return sig;
    }
    if (shift > 63) {
        return 0; // sig < 2^53, so it lies below half of the last kept unit
    }
    const auto s = static_cast<unsigned>(shift);
    const std::uint64_t kept = sig >> s;
    const std::uint64_t rest = sig & ((std::uint64_t{1} << s) - 1);
    const std::uint64_t half = std::uint64_t{1} << (s - 1);
    return (rest > half || (rest == half && (kept & 1) != 0)) ? kept + 1 : kept;
}

template <class Format>
CANOPY_HD std::uint16_t narrow16(double v) {
    constexpr std::uint64_t FRACTION_MASK = (std::uint64_t{1} << 52) - 1;
    constexpr std::uint64_t EXPONENT_MASK = std::uint64_t{0x7FF} << 52;
    const std::uint64_t bits = bits_of(v);
    const auto sign = static_cast<std::uint16_t>((bits >> 48) & 0x8000);
    const std::uint64_t magnitude = bits & ~(std::uint64_t{1} << 63);
    if (magnitude > EXPONENT_MASK) {
        return CANONICAL_NAN16;
    }
    if (magnitude == EXPONENT_MASK) {
        return static_cast<std::uint16_t>(sign | Format::INFINITY_BITS);
    }
    const auto biased = static_cast<int>(magnitude >> 52);
    if (biased == 0) {
        return sign; // a double subnormal (< 2^-1022) rounds to zero in both formats
    }
    const int exponent = biased - 1023;
    if (exponent > Format::MAX_EXPONENT) {
        return static_cast<std::uint16_t>(sign | Format::INFINITY_BITS);
    }
    const std::uint64_t sig = (magnitude & FRACTION_MASK) | (std::uint64_t{1} << 52);
    // Normal results keep FRACTION_BITS + 1 significand bits; subnormal ones fewer, on the 2^(min - fraction) grid.
    const bool subnormal = exponent < Format::MIN_EXPONENT;
    const int shift = 52 - Format::FRACTION_BITS + (subnormal ? Format::MIN_EXPONENT - exponent : 0);
    const std::uint64_t q = round_shift(sig, shift);
    // A normal q includes the hidden bit, which adds the 1 of the biased exponent; a carry out of the
    // significand moves into the exponent field; a subnormal q that reaches 2^FRACTION_BITS is the smallest
    // normal value.
    const std::uint64_t steps = subnormal ? 0 : static_cast<std::uint64_t>(exponent - Format::MIN_EXPONENT);
    const std::uint64_t result = (steps << static_cast<unsigned>(Format::FRACTION_BITS)) + q;
    if (result >= Format::INFINITY_BITS) {
        return static_cast<std::uint16_t>(sign | Format::INFINITY_BITS);
    }
    return static_cast<std::uint16_t>(sign | result);
}

CANOPY_HD float float16_to_float(std::uint16_t bits) {
    const std::uint32_t sign = static_cast<std::uint32_t>(bits & 0x8000u) << 16;
    const std::uint32_t exponent = (static_cast<std::uint32_t>(bits) >> 10) & 0x1Fu;
    const std::uint32_t fraction = bits & 0x3FFu;
    if (exponent == 0x1F) {
        return float_from_bits(sign | 0x7F800000u | (fraction << 13));
    }
    if (exponent == 0) {
        // fraction · 2^-24 is exact in float, and a normal float.
        const float magnitude = static_cast<float>(fraction) * 0x1p-24f;
        return sign != 0 ? -magnitude : magnitude;
    }
    return float_from_bits(sign | ((exponent + 112u) << 23) | (fraction << 13));
}

CANOPY_HD float bfloat16_to_float(std::uint16_t bits) {
    return float_from_bits(static_cast<std::uint32_t>(bits) << 16);
}

// Byte offset of element `i` (row-major logical order) from the view's origin. Index is the unsigned type the
// divisions run in: 32 bits when the view has fewer than 2^32 elements (much cheaper on the GPU), else 64.
template <class Index>
CANOPY_HD std::uint64_t element_offset_in(const cuda_abi::DeviceView& v, Index i) {
    std::uint64_t offset = 0;
    for (std::uint32_t d = v.ndims - 1; d > 0; --d) {
        const auto shape = static_cast<Index>(v.shapes[d]);
        offset += static_cast<std::uint64_t>(i % shape) * v.strides[d];
        i /= shape;
    }
    return offset + static_cast<std::uint64_t>(i) * v.strides[0];
}

#if defined(__CUDA_ARCH__)
// The 64-bit path on the GPU, out of line: its divisions are long instruction sequences, and the vector kernels
// that gather an unpaired read view compute 64 addresses per loop iteration, so inlining it everywhere made half of
// the kernels' code and of nvcc's time. Views of 2^32 elements or more with several dimensions are rare; the call
// costs them little next to the divisions. The kernels' parameters are __grid_constant__ (kernels.cu), so the view
// is read where it lies rather than from a copy in local memory.
__device__ __noinline__ inline std::uint64_t element_offset_wide(const cuda_abi::DeviceView& v, std::uint64_t i) {
    return element_offset_in<std::uint64_t>(v, i);
}
#endif

CANOPY_HD std::uint64_t element_offset(const cuda_abi::DeviceView& v, std::uint64_t i) {
    if (v.ndims == 1) {
        return i * v.strides[0];
    }
    if (v.count <= 0xFFFFFFFFu) {
        return element_offset_in<std::uint32_t>(v, static_cast<std::uint32_t>(i));
    }
#if defined(__CUDA_ARCH__)
    return element_offset_wide(v, i);
#else
    return element_offset_in<std::uint64_t>(v, i);
#endif
}

// Whether the vector kernels (16-byte loads and stores) can take view `v`: contiguous (one dimension whose stride
// is the element size, as make_device_view leaves every dense view) with its origin a multiple of the element
// size, which divides 16 for every dtype.
CANOPY_HD bool vectorizable(const cuda_abi::DeviceView& v) {
    return v.ndims == 1 && v.element_size != 0 && v.strides[0] == v.element_size && 16 % v.element_size == 0 &&
           v.origin % v.element_size == 0;
}

// A vectorizable view cut at 16-byte boundaries: elements [0, head) lie before its first boundary, [head,
// tail_start) fill `vectors` whole 16-byte vectors from that boundary on (16 / element_size elements each), and
// [tail_start, count) follow the last whole vector. A view shorter than its head is all head.
struct VectorSplit {
    std::uint64_t head;
    std::uint64_t vectors;
    std::uint64_t tail_start;
};

// REQUIRES: origin % element_size == 0 and element_size divides 16.
CANOPY_HD VectorSplit vector_split(std::uint64_t origin, std::uint64_t count, std::uint64_t element_size) {
    const std::uint64_t lead = ((16 - origin % 16) % 16) / element_size;
    const std::uint64_t head = lead < count ? lead : count;
    const std::uint64_t vectors = (count - head) / (16 / element_size);
    return {head, vectors, head + vectors * (16 / element_size)};
}

// Whether `in` can be read with the 16-byte vectors in which `out` is written: both vectorizable, with the same
// element size and the same origin modulo 16, so that their splits coincide. REQUIRES: equal element counts.
CANOPY_HD bool vectors_pair(const cuda_abi::DeviceView& out, const cuda_abi::DeviceView& in) {
    return vectorizable(out) && vectorizable(in) && in.element_size == out.element_size &&
           in.origin % 16 == out.origin % 16;
}

} // namespace canopy::worker::cuda_math
