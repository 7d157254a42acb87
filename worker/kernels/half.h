#pragma once
// Conversions between the 16-bit float formats of the wire ABI and float / double.
//
// float16 is IEEE 754 binary16 (1 sign, 5 exponent, 10 fraction bits, bias 15); bfloat16 is the upper half
// of an IEEE binary32 (1 sign, 8 exponent, 7 fraction bits, bias 127). Both are handled as raw bit patterns.
//
// Widening (to float) is exact for every finite value, infinities and subnormals included; a NaN stays a NaN
// of the same sign.
// Narrowing (from float or double) rounds to nearest, ties to even, in one step from the source value.
// Subnormal results are produced (no flush to zero), values past the largest finite value round to
// infinity as IEEE 754 requires (float16: |v| >= 65520 becomes infinity), the sign of zero is kept, and every
// NaN becomes the canonical NaN 0x7FFF, whatever its sign and payload. This matches CUDA's __float2half_rn,
// __double2half, __float2bfloat16_rn and __double2bfloat16.
//
// Thread safety: pure functions.

#include <cstdint>

namespace canopy::kernels {

inline constexpr std::uint16_t CANONICAL_NAN16 = 0x7FFF;

float float16_to_float(std::uint16_t bits) noexcept;
std::uint16_t float_to_float16(float v) noexcept;
std::uint16_t double_to_float16(double v) noexcept;

float bfloat16_to_float(std::uint16_t bits) noexcept;
std::uint16_t float_to_bfloat16(float v) noexcept;
std::uint16_t double_to_bfloat16(double v) noexcept;

} // namespace canopy::kernels
