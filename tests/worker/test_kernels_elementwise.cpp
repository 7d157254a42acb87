// fill, iota, copy, scale and axpy on dense and strided views, several dtypes, both worker kinds.
#include "test_kernels_support.h"

#include <bit>
#include <cmath>
#include <limits>

using namespace canopy;
using namespace canopy::kernels;
using namespace canopy::kernels::test;

namespace {

// Element (i, j) of a rows x cols row-major matrix stored with row pitch `pitch` elements.
std::size_t at(std::size_t i, std::size_t j, std::size_t pitch) {
    return i * pitch + j;
}

} // namespace

TEST_CASE("fill writes the converted value to every element of a dense view", "[kernels]") {
    for (WorkerKind kind : BOTH_KINDS) {
        FakeBuffer buf(4 * 10);
        CallBuilder b("fill");
        b.out(make_view(buf, DataType::FLOAT32, {2, 5}), buf).scalar(ScalarArg::f64(1.5));
        run(kind, b);
        for (std::size_t i = 0; i < 10; ++i) {
            CHECK(buf.get<float>(i) == 1.5f);
        }
    }
}

TEST_CASE("fill writes only the elements of an every-other-element view", "[kernels]") {
    for (WorkerKind kind : BOTH_KINDS) {
        FakeBuffer buf(2 * 16);
        CallBuilder b("fill");
        b.out(make_view(buf, DataType::INT16, {8}, {2}), buf).scalar(ScalarArg::i64(-3));
        run(kind, b);
        for (std::size_t i = 0; i < 16; ++i) {
            CHECK(buf.get<std::uint16_t>(i) == (i % 2 == 0 ? 0xFFFD : 0xEEEE));
        }
    }
}

TEST_CASE("fill converts floats to integers toward zero, saturating, with NaN as zero", "[kernels]") {
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const std::pair<ScalarArg, std::int8_t> int8_cases[] = {
        {ScalarArg::f64(3.9), 3},       {ScalarArg::f64(-3.9), -3}, {ScalarArg::f32(1000.f), 127},
        {ScalarArg::f64(-1e300), -128}, {ScalarArg::f64(nan), 0},   {ScalarArg::i64(300), 127},
        {ScalarArg::i64(-300), -128},   {ScalarArg::f64(-0.0), 0},  {ScalarArg::f64(127.99), 127},
    };
    for (const auto& [scalar, expected] : int8_cases) {
        FakeBuffer buf(3);
        CallBuilder b("fill");
        b.out(make_view(buf, DataType::INT8, {3}), buf).scalar(scalar);
        run(WorkerKind::SUB, b);
        CHECK(buf.get<std::int8_t>(2) == expected);
    }
    FakeBuffer u8(1);
    CallBuilder neg("fill");
    neg.out(make_view(u8, DataType::UINT8, {1}), u8).scalar(ScalarArg::f64(-5.5));
    run(WorkerKind::CHIP, neg);
    CHECK(u8.get<std::uint8_t>(0) == 0);
    FakeBuffer i64(8);
    CallBuilder big("fill");
    big.out(make_view(i64, DataType::INT64, {1}), i64).scalar(ScalarArg::f64(1e30));
    run(WorkerKind::CHIP, big);
    CHECK(i64.get<std::int64_t>(0) == std::numeric_limits<std::int64_t>::max());
    CallBuilder exact("fill");
    exact.out(make_view(i64, DataType::INT64, {1}), i64).scalar(ScalarArg::i64(-9'007'199'254'740'993));
    run(WorkerKind::CHIP, exact);
    CHECK(i64.get<std::int64_t>(0) == -9'007'199'254'740'993);
}

TEST_CASE("fill rounds to float16, bfloat16 and float32 to nearest even", "[kernels]") {
    struct Case {
        DataType dtype;
        ScalarArg value;
        std::uint32_t bits;
    };
    const Case cases[] = {
        {DataType::FLOAT16, ScalarArg::f32(1.0f), 0x3C00},
        {DataType::FLOAT16, ScalarArg::f64(65520.0), 0x7C00},
        {DataType::FLOAT16, ScalarArg::i64(-2), 0xC000},
        {DataType::FLOAT16, ScalarArg::f64(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)), 0x3C01},
        {DataType::BFLOAT16, ScalarArg::f32(1.0f), 0x3F80},
        {DataType::BFLOAT16, ScalarArg::i64(257), 0x4380},
        {DataType::FLOAT32, ScalarArg::f64(1e39), 0x7F800000},
        {DataType::FLOAT32, ScalarArg::f64(0.1), std::bit_cast<std::uint32_t>(0.1f)},
        {DataType::FLOAT32, ScalarArg::i64(16'777'217), 0x4B800000},
    };
    for (const Case& c : cases) {
        FakeBuffer buf(8);
        CallBuilder b("fill");
        b.out(make_view(buf, c.dtype, {1}), buf).scalar(c.value);
        run(WorkerKind::CHIP, b);
        const std::uint32_t got = element_size(c.dtype) == 2 ? buf.get<std::uint16_t>(0) : buf.get<std::uint32_t>(0);
        CHECK(got == c.bits);
    }
}

TEST_CASE("iota numbers a transposed view in row-major logical order", "[kernels]") {
    for (WorkerKind kind : BOTH_KINDS) {
        // A 4x3 row-major matrix seen as its 3x4 transpose: logical (i, j) lies at element j*3 + i.
        FakeBuffer buf(4 * 12);
        CallBuilder b("iota");
        b.out(make_view(buf, DataType::FLOAT32, {3, 4}, {1, 3}), buf);
        run(kind, b);
        for (std::size_t i = 0; i < 3; ++i) {
            for (std::size_t j = 0; j < 4; ++j) {
                CHECK(buf.get<float>(j * 3 + i) == static_cast<float>(i * 4 + j));
            }
        }
    }
}

TEST_CASE("iota saturates integer dtypes and rounds 16-bit floats", "[kernels]") {
    FakeBuffer i8(200);
    CallBuilder b("iota");
    b.out(make_view(i8, DataType::INT8, {200}), i8);
    run(WorkerKind::SUB, b);
    CHECK(i8.get<std::int8_t>(5) == 5);
    CHECK(i8.get<std::int8_t>(127) == 127);
    CHECK(i8.get<std::int8_t>(199) == 127);

    FakeBuffer bf(2 * 260);
    CallBuilder bb("iota");
    bb.out(make_view(bf, DataType::BFLOAT16, {260}), bf);
    run(WorkerKind::CHIP, bb);
    CHECK(bf.get<std::uint16_t>(3) == 0x4040);   // 3
    CHECK(bf.get<std::uint16_t>(257) == 0x4380); // 257 is a tie between 256 and 258: even is 256
    CHECK(bf.get<std::uint16_t>(259) == 0x4382); // 259 is a tie between 258 (0x4381) and 260
}

TEST_CASE("copy moves a column block into a dense view", "[kernels]") {
    for (WorkerKind kind : BOTH_KINDS) {
        // Columns 1..2 of a 3x4 float64 matrix.
        FakeBuffer in(8 * 12);
        for (std::size_t k = 0; k < 12; ++k) {
            in.set<double>(k, static_cast<double>(k) + 0.25);
        }
        FakeBuffer out(8 * 6);
        CallBuilder b("copy");
        b.in(make_view(in, DataType::FLOAT64, {3, 2}, {4, 1}, 8), in)
            .out(make_view(out, DataType::FLOAT64, {3, 2}), out);
        run(kind, b);
        for (std::size_t i = 0; i < 3; ++i) {
            for (std::size_t j = 0; j < 2; ++j) {
                CHECK(out.get<double>(at(i, j, 2)) == in.get<double>(at(i, j + 1, 4)));
            }
        }
    }
}

TEST_CASE("copy between different shapes is a reshape in row-major order", "[kernels]") {
    FakeBuffer in(12);
    for (std::size_t k = 0; k < 12; ++k) {
        in.set<std::int8_t>(k, static_cast<std::int8_t>(k * 10 - 60));
    }
    FakeBuffer out(24);
    // [2,6] dense into a [3,4] view whose rows are every other element of a 3x8 matrix.
    CallBuilder b("copy");
    b.in(make_view(in, DataType::INT8, {2, 6}), in).out(make_view(out, DataType::INT8, {3, 4}, {8, 2}), out);
    run(WorkerKind::SUB, b);
    for (std::size_t k = 0; k < 12; ++k) {
        CHECK(out.get<std::int8_t>((k / 4) * 8 + (k % 4) * 2) == in.get<std::int8_t>(k));
        CHECK(out.get<std::uint8_t>((k / 4) * 8 + (k % 4) * 2 + 1) == 0xEE);
    }
}

TEST_CASE("copy keeps NaN payloads and the sign of zero", "[kernels]") {
    FakeBuffer in(4 * 3);
    in.set<std::uint32_t>(0, 0x7FA00001); // a signalling NaN with a payload
    in.set<std::uint32_t>(1, 0x80000000); // -0
    in.set<std::uint32_t>(2, 0xFFC12345);
    FakeBuffer out(4 * 3);
    CallBuilder b("copy");
    b.in(make_view(in, DataType::FLOAT32, {3}), in).out(make_view(out, DataType::FLOAT32, {3}), out);
    run(WorkerKind::CHIP, b);
    CHECK(out.bytes() == in.bytes());
}

TEST_CASE("scale multiplies a strided float32 view in place", "[kernels]") {
    for (WorkerKind kind : BOTH_KINDS) {
        FakeBuffer buf(4 * 8);
        for (std::size_t k = 0; k < 8; ++k) {
            buf.set<float>(k, static_cast<float>(k));
        }
        CallBuilder b("scale");
        b.inout(make_view(buf, DataType::FLOAT32, {4}, {2}, 4), buf).scalar(ScalarArg::i64(-3));
        run(kind, b);
        for (std::size_t k = 0; k < 8; ++k) {
            CHECK(buf.get<float>(k) == (k % 2 == 1 ? -3.0f * static_cast<float>(k) : static_cast<float>(k)));
        }
    }
}

TEST_CASE("scale converts the factor to the integer dtype and wraps the product", "[kernels]") {
    FakeBuffer buf(2 * 3);
    buf.set<std::int16_t>(0, 300);
    buf.set<std::int16_t>(1, -7);
    buf.set<std::int16_t>(2, 16'000);
    CallBuilder b("scale");
    b.inout(make_view(buf, DataType::INT16, {3}), buf).scalar(ScalarArg::f64(200.9)); // a becomes 200
    run(WorkerKind::SUB, b);
    CHECK(buf.get<std::int16_t>(0) == static_cast<std::int16_t>(60'000 - 65'536));
    CHECK(buf.get<std::int16_t>(1) == -1400);
    CHECK(buf.get<std::int16_t>(2) == static_cast<std::int16_t>((3'200'000 % 65'536) - 65'536));
}

TEST_CASE("scale rounds float16 and bfloat16 products once to nearest even", "[kernels]") {
    FakeBuffer h(2 * 2);
    h.set<std::uint16_t>(0, 0x3C01); // 1 + 2^-10
    h.set<std::uint16_t>(1, 0x3E00); // 1.5
    CallBuilder hb("scale");
    hb.inout(make_view(h, DataType::FLOAT16, {2}), h).scalar(ScalarArg::f32(1.0f + 0x1p-10f));
    run(WorkerKind::SUB, hb);
    CHECK(h.get<std::uint16_t>(0) == 0x3C02); // 1 + 2^-9 + 2^-20 rounds to 1 + 2^-9
    CHECK(h.get<std::uint16_t>(1) == 0x3E02); // 1.5 + 2^-10 + 2^-11: a tie, to the even 1.5 + 2^-9
    FakeBuffer bf(2);
    bf.set<std::uint16_t>(0, 0x4040); // 3
    CallBuilder bb("scale");
    bb.inout(make_view(bf, DataType::BFLOAT16, {1}), bf).scalar(ScalarArg::f64(0.5));
    run(WorkerKind::CHIP, bb);
    CHECK(bf.get<std::uint16_t>(0) == 0x3FC0); // 1.5
}

TEST_CASE("axpy rounds the product before the sum instead of fusing them", "[kernels]") {
    // a*x = 1 + 2^-11 + 2^-24 rounds to 1 + 2^-11, so y ends at exactly 0; a fused multiply-add gives 2^-24.
    for (WorkerKind kind : BOTH_KINDS) {
        FakeBuffer x(4);
        FakeBuffer y(4);
        x.set<float>(0, 1.0f + 0x1p-12f);
        y.set<float>(0, -(1.0f + 0x1p-11f));
        CallBuilder b("axpy");
        b.in(make_view(x, DataType::FLOAT32, {1}), x)
            .inout(make_view(y, DataType::FLOAT32, {1}), y)
            .scalar(ScalarArg::f32(1.0f + 0x1p-12f));
        run(kind, b);
        CHECK(std::bit_cast<std::uint32_t>(y.get<float>(0)) == 0);
    }
}

TEST_CASE("axpy pairs a transposed x with an every-other-element y", "[kernels]") {
    for (WorkerKind kind : BOTH_KINDS) {
        FakeBuffer x(8 * 6); // 3x2 row-major; the view is its 2x3 transpose
        for (std::size_t k = 0; k < 6; ++k) {
            x.set<double>(k, static_cast<double>(k + 1));
        }
        FakeBuffer y(8 * 12);
        for (std::size_t k = 0; k < 12; ++k) {
            y.set<double>(k, 100.0 * static_cast<double>(k));
        }
        CallBuilder b("axpy");
        b.in(make_view(x, DataType::FLOAT64, {2, 3}, {1, 2}), x)
            .inout(make_view(y, DataType::FLOAT64, {6}, {2}), y)
            .scalar(ScalarArg::f64(0.5));
        run(kind, b);
        for (std::size_t i = 0; i < 2; ++i) {
            for (std::size_t j = 0; j < 3; ++j) {
                const std::size_t logical = i * 3 + j;
                const double expected = 0.5 * x.get<double>(j * 2 + i) + 100.0 * static_cast<double>(2 * logical);
                CHECK(y.get<double>(2 * logical) == expected);
                CHECK(y.get<double>(2 * logical + 1) == 100.0 * static_cast<double>(2 * logical + 1));
            }
        }
    }
}

TEST_CASE("axpy wraps integer arithmetic modulo 2^bits", "[kernels]") {
    FakeBuffer x(2);
    FakeBuffer y(2);
    x.set<std::int8_t>(0, 100);
    x.set<std::int8_t>(1, -100);
    y.set<std::int8_t>(0, 100);
    y.set<std::int8_t>(1, 1);
    CallBuilder b("axpy");
    b.in(make_view(x, DataType::INT8, {2}), x).inout(make_view(y, DataType::INT8, {2}), y).scalar(ScalarArg::i64(2));
    run(WorkerKind::SUB, b);
    CHECK(y.get<std::int8_t>(0) == 44); // 300 mod 256
    CHECK(y.get<std::int8_t>(1) == 57); // -199 mod 256
}

TEST_CASE("axpy on bfloat16 rounds the product and then the sum", "[kernels]") {
    FakeBuffer x(4);
    FakeBuffer y(4);
    x.set<std::uint16_t>(0, 0x3F81); // 1 + 2^-7
    x.set<std::uint16_t>(1, 0x4000); // 2
    y.set<std::uint16_t>(0, 0xBF80); // -1
    y.set<std::uint16_t>(1, 0x4000); // 2
    CallBuilder b("axpy");
    b.in(make_view(x, DataType::BFLOAT16, {2}), x)
        .inout(make_view(y, DataType::BFLOAT16, {2}), y)
        .scalar(ScalarArg::f32(1.0f + 0x1p-7f));
    run(WorkerKind::CHIP, b);
    // (1 + 2^-7)^2 = 1 + 2^-6 + 2^-14 rounds to 1 + 2^-6; minus 1 leaves 2^-6.
    CHECK(y.get<std::uint16_t>(0) == 0x3C80);
    // 2 * (1 + 2^-7) = 2 + 2^-6 is exact; plus 2 is 4 + 2^-6, a tie between 4 and 4 + 2^-5: even is 4.
    CHECK(y.get<std::uint16_t>(1) == 0x4080);
}
