#pragma once
// Value conversions shared by the kernels (docs/kernels.md, "Conversions"):
//   double -> float      round to nearest even; magnitudes that round past FLT_MAX become infinity
//   double -> integer    round toward zero, saturate at the type's range, NaN -> 0
//   int64  -> integer    saturate at the type's range
//   uint64 -> integer    saturate at the type's maximum
// Every conversion is defined for every input: none of them reaches a C++ cast whose result is undefined.
//
// Thread safety: pure functions.

#include <cstdint>
#include <limits>
#include <type_traits>

namespace canopy::kernels::detail {

// 2^128 - 2^103: half a unit in the last place above FLT_MAX. Round-to-nearest-even takes it and everything
// above it to infinity.
inline constexpr double FLOAT_OVERFLOW_THRESHOLD = 3.4028235677973366e38;

inline float double_to_float(double v) noexcept {
    if (v >= FLOAT_OVERFLOW_THRESHOLD) {
        return std::numeric_limits<float>::infinity();
    }
    if (v <= -FLOAT_OVERFLOW_THRESHOLD) {
        return -std::numeric_limits<float>::infinity();
    }
    return static_cast<float>(v); // in range or NaN: round to nearest even
}

template <class I>
I double_to_int(double v) noexcept {
    static_assert(std::is_integral_v<I>);
    using Limits = std::numeric_limits<I>;
    // Both bounds are powers of two (or zero), so they are exact doubles.
    const double lowest = static_cast<double>(Limits::min());
    const double past_max = static_cast<double>(Limits::max() / 2 + 1) * 2.0;
    if (v != v) {
        return 0;
    }
    if (v <= lowest) {
        return Limits::min();
    }
    if (v >= past_max) {
        return Limits::max();
    }
    return static_cast<I>(v); // truncates toward zero; the result is in range
}

template <class I>
I int64_to_int(std::int64_t v) noexcept {
    static_assert(std::is_integral_v<I>);
    using Limits = std::numeric_limits<I>;
    if constexpr (std::is_signed_v<I>) {
        if (v < static_cast<std::int64_t>(Limits::min())) {
            return Limits::min();
        }
        if (v > static_cast<std::int64_t>(Limits::max())) {
            return Limits::max();
        }
    } else {
        if (v < 0) {
            return 0;
        }
        if (static_cast<std::uint64_t>(v) > static_cast<std::uint64_t>(Limits::max())) {
            return Limits::max();
        }
    }
    return static_cast<I>(v);
}

template <class I>
I uint64_to_int(std::uint64_t v) noexcept {
    static_assert(std::is_integral_v<I>);
    const auto max = static_cast<std::uint64_t>(std::numeric_limits<I>::max());
    return static_cast<I>(v > max ? max : v);
}

} // namespace canopy::kernels::detail
