// reduce_sum: accumulation type, order and the final conversion.
#include "test_kernels_support.h"

#include <bit>
#include <cmath>
#include <limits>

using namespace canopy;
using namespace canopy::kernels;
using namespace canopy::kernels::test;

TEST_CASE("reduce_sum accumulates float32 in double", "[kernels]") {
    for (WorkerKind kind : BOTH_KINDS) {
        // In float, 1e8 + 1 rounds back to 1e8 and the sum would be 0.
        FakeBuffer x(4 * 3);
        x.set<float>(0, 1e8f);
        x.set<float>(1, 1.0f);
        x.set<float>(2, -1e8f);
        FakeBuffer y(4);
        CallBuilder b("reduce_sum");
        b.in(make_view(x, DataType::FLOAT32, {3}), x).out(make_view(y, DataType::FLOAT32, {1}), y);
        run(kind, b);
        CHECK(y.get<float>(0) == 1.0f);
    }
}

TEST_CASE("reduce_sum adds a column block of a matrix in row-major order", "[kernels]") {
    for (WorkerKind kind : BOTH_KINDS) {
        FakeBuffer x(4 * 12); // 3x4 int32, columns 2..3
        for (std::size_t k = 0; k < 12; ++k) {
            x.set<std::int32_t>(k, static_cast<std::int32_t>(k * k));
        }
        FakeBuffer y(8);
        CallBuilder b("reduce_sum");
        b.in(make_view(x, DataType::INT32, {3, 2}, {4, 1}, 8), x).out(make_view(y, DataType::INT32, {1, 1}, {}, 4), y);
        run(kind, b);
        CHECK(y.get<std::int32_t>(1) == 4 + 9 + 36 + 49 + 100 + 121);
        CHECK(y.get<std::uint32_t>(0) == 0xEEEEEEEE);
    }
}

TEST_CASE("reduce_sum wraps integer sums modulo 2^bits", "[kernels]") {
    FakeBuffer x(100);
    for (std::size_t k = 0; k < 100; ++k) {
        x.set<std::int8_t>(k, 100);
    }
    FakeBuffer y(1);
    CallBuilder b("reduce_sum");
    b.in(make_view(x, DataType::INT8, {10, 10}), x).out(make_view(y, DataType::INT8, {1}), y);
    run(WorkerKind::SUB, b);
    CHECK(y.get<std::int8_t>(0) == 16); // 10000 mod 256

    FakeBuffer big(16);
    big.set<std::int64_t>(0, std::numeric_limits<std::int64_t>::max());
    big.set<std::int64_t>(1, 1);
    FakeBuffer out(8);
    CallBuilder w("reduce_sum");
    w.in(make_view(big, DataType::INT64, {2}), big).out(make_view(out, DataType::INT64, {1}), out);
    run(WorkerKind::CHIP, w);
    CHECK(out.get<std::int64_t>(0) == std::numeric_limits<std::int64_t>::min());
}

TEST_CASE("reduce_sum of float16 rounds once, after a double accumulation", "[kernels]") {
    // 1 + 2^-11 + 2^-11 = 1 + 2^-10 exactly; summing in float16 would round each partial sum back to 1.
    FakeBuffer x(2 * 3);
    x.set<std::uint16_t>(0, 0x3C00);
    x.set<std::uint16_t>(1, 0x1000); // 2^-11
    x.set<std::uint16_t>(2, 0x1000);
    FakeBuffer y(2);
    CallBuilder b("reduce_sum");
    b.in(make_view(x, DataType::FLOAT16, {3}), x).out(make_view(y, DataType::FLOAT16, {1}), y);
    run(WorkerKind::SUB, b);
    CHECK(y.get<std::uint16_t>(0) == 0x3C01);
}

TEST_CASE("reduce_sum of bfloat16 over every other element", "[kernels]") {
    FakeBuffer x(2 * 6);
    const std::uint16_t values[] = {0x3F80, 0xFFFF, 0x4000, 0xFFFF, 0xC040, 0xFFFF}; // 1, NaN, 2, NaN, -3, NaN
    for (std::size_t k = 0; k < 6; ++k) {
        x.set<std::uint16_t>(k, values[k]);
    }
    FakeBuffer y(2);
    CallBuilder b("reduce_sum");
    b.in(make_view(x, DataType::BFLOAT16, {3}, {2}), x).out(make_view(y, DataType::BFLOAT16, {1}), y);
    run(WorkerKind::CHIP, b);
    CHECK(y.get<std::uint16_t>(0) == 0x0000); // +0: the accumulator starts at +0
}

TEST_CASE("reduce_sum propagates NaN and 16-bit results take the canonical NaN", "[kernels]") {
    FakeBuffer x(2 * 2);
    x.set<std::uint16_t>(0, 0x3C00);
    x.set<std::uint16_t>(1, 0xFE01); // a negative NaN with a payload
    FakeBuffer y(2);
    CallBuilder b("reduce_sum");
    b.in(make_view(x, DataType::FLOAT16, {2}), x).out(make_view(y, DataType::FLOAT16, {1}), y);
    run(WorkerKind::SUB, b);
    CHECK(y.get<std::uint16_t>(0) == 0x7FFF);

    FakeBuffer d(8 * 2);
    d.set<double>(0, 1.0);
    d.set<double>(1, std::numeric_limits<double>::quiet_NaN());
    FakeBuffer e(8);
    CallBuilder bd("reduce_sum");
    bd.in(make_view(d, DataType::FLOAT64, {2}), d).out(make_view(e, DataType::FLOAT64, {1}), e);
    run(WorkerKind::SUB, bd);
    CHECK(std::isnan(e.get<double>(0)));
}
