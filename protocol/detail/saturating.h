#pragma once
// Saturating u64 arithmetic for wire values: a result that does not fit becomes UINT64_MAX.

#include <cstdint>

namespace canopy::detail {

constexpr std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) noexcept {
    std::uint64_t r = 0;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

constexpr std::uint64_t sat_mul(std::uint64_t a, std::uint64_t b) noexcept {
    std::uint64_t r = 0;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

} // namespace canopy::detail
