#include "worker/kernels/half.h"

#include <bit>
#include <cmath>

namespace canopy::kernels {
namespace {

// A binary floating-point format narrower than double.
struct Narrow16 {
    int fraction_bits;
    int min_exponent; // unbiased exponent of the smallest normal value
    int max_exponent; // unbiased exponent of the largest finite value
    std::uint16_t infinity;
};

constexpr Narrow16 FLOAT16{10, -14, 15, 0x7C00};
constexpr Narrow16 BFLOAT16{7, -126, 127, 0x7F80};

constexpr std::uint64_t DOUBLE_FRACTION_MASK = (std::uint64_t{1} << 52) - 1;
constexpr std::uint64_t DOUBLE_EXPONENT_MASK = std::uint64_t{0x7FF} << 52;

// Rounds `sig` (a 53-bit significand with its hidden bit) right by `shift` bits, to nearest, ties to even.
std::uint64_t round_shift(std::uint64_t sig, int shift) noexcept {
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

// The one narrowing routine: double to a 16-bit format, round to nearest even.
std::uint16_t narrow(double v, const Narrow16& f) noexcept {
    const auto bits = std::bit_cast<std::uint64_t>(v);
    const auto sign = static_cast<std::uint16_t>((bits >> 48) & 0x8000);
    const std::uint64_t magnitude = bits & ~(std::uint64_t{1} << 63);
    if (magnitude > DOUBLE_EXPONENT_MASK) {
        return CANONICAL_NAN16;
    }
    if (magnitude == DOUBLE_EXPONENT_MASK) {
        return static_cast<std::uint16_t>(sign | f.infinity);
    }
    const auto biased = static_cast<int>(magnitude >> 52);
    if (biased == 0) {
        return sign; // a double subnormal (< 2^-1022) rounds to zero in both formats
    }
    const int exponent = biased - 1023;
    if (exponent > f.max_exponent) {
        return static_cast<std::uint16_t>(sign | f.infinity);
    }
    const std::uint64_t sig = (magnitude & DOUBLE_FRACTION_MASK) | (std::uint64_t{1} << 52);
    // Normal results keep fraction_bits + 1 significand bits; subnormal ones fewer, on the 2^(min - fraction) grid.
    const int shift = 52 - f.fraction_bits + (exponent < f.min_exponent ? f.min_exponent - exponent : 0);
    const std::uint64_t q = round_shift(sig, shift);
    // A normal q includes the hidden bit, which adds the 1 of the biased exponent; a carry out of the
    // significand moves into the exponent field, and a subnormal q that reaches 2^fraction_bits is the
    // smallest normal value.
    const std::uint64_t steps = exponent < f.min_exponent ? 0 : static_cast<std::uint64_t>(exponent - f.min_exponent);
    const std::uint64_t result = (steps << static_cast<unsigned>(f.fraction_bits)) + q;
    if (result >= f.infinity) {
        return static_cast<std::uint16_t>(sign | f.infinity);
    }
    return static_cast<std::uint16_t>(sign | result);
}

} // namespace

float float16_to_float(std::uint16_t bits) noexcept {
    const std::uint32_t sign = std::uint32_t{bits & 0x8000u} << 16;
    const std::uint32_t exponent = (bits >> 10) & 0x1Fu;
    const std::uint32_t fraction = bits & 0x3FFu;
    if (exponent == 0x1F) {
        return std::bit_cast<float>(sign | 0x7F800000u | (fraction << 13));
    }
    if (exponent == 0) {
        const float magnitude = std::ldexp(static_cast<float>(fraction), -24);
        return sign != 0 ? -magnitude : magnitude;
    }
    return std::bit_cast<float>(sign | ((exponent + 112u) << 23) | (fraction << 13));
}

std::uint16_t float_to_float16(float v) noexcept {
    return narrow(static_cast<double>(v), FLOAT16);
}

std::uint16_t double_to_float16(double v) noexcept {
    return narrow(v, FLOAT16);
}

float bfloat16_to_float(std::uint16_t bits) noexcept {
    return std::bit_cast<float>(std::uint32_t{bits} << 16);
}

std::uint16_t float_to_bfloat16(float v) noexcept {
    return narrow(static_cast<double>(v), BFLOAT16);
}

std::uint16_t double_to_bfloat16(double v) noexcept {
    return narrow(v, BFLOAT16);
}

} // namespace canopy::kernels
