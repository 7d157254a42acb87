// float16 / bfloat16 conversions: exact widening, round-to-nearest-even narrowing and the edge cases.
#include "worker/kernels/half.h"

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>

using namespace canopy::kernels;

namespace {

const float INF = std::numeric_limits<float>::infinity();
const float NaN = std::numeric_limits<float>::quiet_NaN();

// The value of a float16 bit pattern, computed from the IEEE definition.
double float16_value(std::uint16_t h) {
    const int exponent = (h >> 10) & 0x1F;
    const int fraction = h & 0x3FF;
    const double magnitude = exponent == 0 ? std::ldexp(fraction, -24) : std::ldexp(1024 + fraction, exponent - 25);
    return (h & 0x8000) != 0 ? -magnitude : magnitude;
}

bool is_nan16(std::uint16_t h, int exponent_bits_mask, int fraction_mask) {
    return (h & exponent_bits_mask) == exponent_bits_mask && (h & fraction_mask) != 0;
}

} // namespace

TEST_CASE("float16 widening is exact for every finite pattern", "[kernels]") {
    for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
        const auto bits = static_cast<std::uint16_t>(h);
        if ((bits & 0x7C00) == 0x7C00) {
            continue;
        }
        REQUIRE(static_cast<double>(float16_to_float(bits)) == float16_value(bits));
        REQUIRE(std::signbit(float16_to_float(bits)) == ((bits & 0x8000) != 0));
    }
    CHECK(float16_to_float(0x7C00) == INF);
    CHECK(float16_to_float(0xFC00) == -INF);
    CHECK(std::isnan(float16_to_float(0x7E00)));
    CHECK(std::isnan(float16_to_float(0xFC01)));
}

TEST_CASE("every float16 and bfloat16 pattern survives a round trip through float and double", "[kernels]") {
    for (std::uint32_t h = 0; h <= 0xFFFF; ++h) {
        const auto bits = static_cast<std::uint16_t>(h);
        if (!is_nan16(bits, 0x7C00, 0x3FF)) {
            REQUIRE(float_to_float16(float16_to_float(bits)) == bits);
            REQUIRE(double_to_float16(static_cast<double>(float16_to_float(bits))) == bits);
        }
        if (!is_nan16(bits, 0x7F80, 0x7F)) {
            REQUIRE(float_to_bfloat16(bfloat16_to_float(bits)) == bits);
            REQUIRE(double_to_bfloat16(static_cast<double>(bfloat16_to_float(bits))) == bits);
        }
    }
}

TEST_CASE("float16 narrowing handles zeros, limits, subnormals and infinities", "[kernels]") {
    CHECK(float_to_float16(0.0f) == 0x0000);
    CHECK(float_to_float16(-0.0f) == 0x8000);
    CHECK(float_to_float16(1.0f) == 0x3C00);
    CHECK(float_to_float16(65504.0f) == 0x7BFF);
    CHECK(float_to_float16(65519.99f) == 0x7BFF);
    CHECK(float_to_float16(65520.0f) == 0x7C00); // the tie above the largest finite value goes to infinity
    CHECK(float_to_float16(1e10f) == 0x7C00);
    CHECK(float_to_float16(-1e10f) == 0xFC00);
    CHECK(float_to_float16(INF) == 0x7C00);
    CHECK(float_to_float16(-INF) == 0xFC00);
    CHECK(float_to_float16(0x1p-14f) == 0x0400);            // smallest normal
    CHECK(float_to_float16(0x1p-24f) == 0x0001);            // smallest subnormal
    CHECK(float_to_float16(0x1p-25f) == 0x0000);            // half of it: a tie, to the even zero
    CHECK(float_to_float16(0x1.000002p-25f) == 0x0001);     // just above the tie
    CHECK(float_to_float16(0x3p-25f) == 0x0002);            // 1.5 units: a tie, to the even 2
    CHECK(float_to_float16(-0x1p-26f) == 0x8000);           // underflow keeps the sign
    CHECK(float_to_float16(0x1p-14f - 0x1p-25f) == 0x0400); // tie between the largest subnormal and 2^-14
    CHECK(float_to_float16(1.0f + 0x1p-11f) == 0x3C00);     // tie, to even
    CHECK(float_to_float16(1.0f + 0x3p-11f) == 0x3C02);     // tie, to even
    CHECK(float_to_float16(1.0f + 0x1p-11f + 0x1p-20f) == 0x3C01);
}

TEST_CASE("double to float16 rounds once from the double value", "[kernels]") {
    const double above_tie = 1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40);
    CHECK(double_to_float16(above_tie) == 0x3C01);
    CHECK(float_to_float16(static_cast<float>(above_tie)) == 0x3C00); // float already lost the 2^-40
    CHECK(double_to_float16(1e-300) == 0x0000);
    CHECK(double_to_float16(-std::numeric_limits<double>::denorm_min()) == 0x8000);
    CHECK(double_to_float16(1e300) == 0x7C00);
    CHECK(double_to_float16(65519.999999) == 0x7BFF);
}

TEST_CASE("every NaN narrows to the canonical NaN 0x7FFF", "[kernels]") {
    CHECK(float_to_float16(NaN) == 0x7FFF);
    CHECK(float_to_float16(-NaN) == 0x7FFF);
    CHECK(float_to_float16(std::bit_cast<float>(0x7F800001u)) == 0x7FFF);
    CHECK(double_to_float16(std::numeric_limits<double>::signaling_NaN()) == 0x7FFF);
    CHECK(float_to_bfloat16(NaN) == 0x7FFF);
    CHECK(float_to_bfloat16(std::bit_cast<float>(0xFFC00001u)) == 0x7FFF);
    CHECK(double_to_bfloat16(-std::numeric_limits<double>::quiet_NaN()) == 0x7FFF);
}

TEST_CASE("bfloat16 conversions round to nearest even and keep the float range", "[kernels]") {
    CHECK(bfloat16_to_float(0x3F80) == 1.0f);
    CHECK(bfloat16_to_float(0x0001) == 0x1p-133f);
    CHECK(bfloat16_to_float(0xFF80) == -INF);
    CHECK(std::isnan(bfloat16_to_float(0x7FC1)));
    CHECK(float_to_bfloat16(1.0f) == 0x3F80);
    CHECK(float_to_bfloat16(-0.0f) == 0x8000);
    CHECK(float_to_bfloat16(1.0f + 0x1p-8f) == 0x3F80); // tie, to even
    CHECK(float_to_bfloat16(1.0f + 0x3p-8f) == 0x3F82); // tie, to even
    CHECK(float_to_bfloat16(1.0f + 0x1p-8f + 0x1p-20f) == 0x3F81);
    CHECK(float_to_bfloat16(std::numeric_limits<float>::max()) == 0x7F80);
    CHECK(float_to_bfloat16(0x1.fep127f) == 0x7F7F);  // the largest finite bfloat16
    CHECK(float_to_bfloat16(0x1p-133f) == 0x0001);    // smallest subnormal
    CHECK(float_to_bfloat16(0x1p-134f) == 0x0000);    // tie, to the even zero
    CHECK(float_to_bfloat16(0x1p-126f) == 0x0080);    // smallest normal
    CHECK(float_to_bfloat16(0x1.fcp-127f) == 0x007F); // the largest subnormal
    CHECK(float_to_bfloat16(0x1.fep-127f) == 0x0080); // the tie above it rounds up to the smallest normal
    CHECK(double_to_bfloat16(1e300) == 0x7F80);
    CHECK(double_to_bfloat16(-1e-300) == 0x8000);
    CHECK(double_to_bfloat16(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -50)) == 0x3F81);
}

TEST_CASE("float16 narrowing picks the nearest value, ties to even, for random floats", "[kernels]") {
    std::mt19937 rng(12345);
    std::uniform_real_distribution<float> magnitude(-26.0f, 15.99f);
    for (int n = 0; n < 200'000; ++n) {
        const float x = std::ldexp(1.0f + static_cast<float>(rng() % 0x800000) * 0x1p-23f,
                                   static_cast<int>(std::floor(magnitude(rng)))) *
                        ((rng() & 1) != 0 ? -1.0f : 1.0f);
        const std::uint16_t h = float_to_float16(x);
        const double got = float16_value(h);
        const double exact = static_cast<double>(x);
        // Neighbours one unit away in magnitude, within the finite range.
        for (int step : {-1, 1}) {
            const int neighbour = (h & 0x7FFF) + step;
            if (neighbour < 0 || neighbour > 0x7BFF) {
                continue;
            }
            const auto other = static_cast<std::uint16_t>((h & 0x8000) | neighbour);
            const double d_got = std::fabs(exact - got);
            const double d_other = std::fabs(exact - float16_value(other));
            REQUIRE(d_got <= d_other);
            if (d_got == d_other) {
                REQUIRE((h & 1) == 0);
            }
        }
    }
}
