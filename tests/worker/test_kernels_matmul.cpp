// matmul: dense and strided operands, the four float dtypes, accumulation order and rounding.
#include "test_kernels_support.h"

#include <bit>
#include <cmath>

using namespace canopy;
using namespace canopy::kernels;
using namespace canopy::kernels::test;

namespace {

// Small integers: every product and partial sum is exact in every dtype under test.
double a_value(std::size_t m, std::size_t k) {
    return static_cast<double>((m * 3 + k * 5) % 7) - 3.0;
}
double b_value(std::size_t k, std::size_t n) {
    return static_cast<double>((k * 2 + n * 3) % 5) - 2.0;
}
double c_value(std::size_t m, std::size_t n, std::size_t depth) {
    double sum = 0;
    for (std::size_t k = 0; k < depth; ++k) {
        sum += a_value(m, k) * b_value(k, n);
    }
    return sum;
}

} // namespace

TEST_CASE("matmul multiplies dense float32 matrices", "[kernels]") {
    constexpr std::size_t M = 3, K = 4, N = 5;
    FakeBuffer a(4 * M * K);
    FakeBuffer b(4 * K * N);
    FakeBuffer c(4 * M * N);
    for (std::size_t m = 0; m < M; ++m) {
        for (std::size_t k = 0; k < K; ++k) {
            a.set<float>(m * K + k, static_cast<float>(a_value(m, k)));
        }
    }
    for (std::size_t k = 0; k < K; ++k) {
        for (std::size_t n = 0; n < N; ++n) {
            b.set<float>(k * N + n, static_cast<float>(b_value(k, n)));
        }
    }
    CallBuilder call("matmul");
    call.in(make_view(a, DataType::FLOAT32, {M, K}), a)
        .in(make_view(b, DataType::FLOAT32, {K, N}), b)
        .out(make_view(c, DataType::FLOAT32, {M, N}), c);
    run(WorkerKind::CHIP, call);
    for (std::size_t m = 0; m < M; ++m) {
        for (std::size_t n = 0; n < N; ++n) {
            CHECK(c.get<float>(m * N + n) == static_cast<float>(c_value(m, n, K)));
        }
    }
}

TEST_CASE("matmul reads a transposed A and a column block of B and writes a strided C", "[kernels]") {
    constexpr std::size_t M = 2, K = 3, N = 2;
    FakeBuffer a(8 * K * M); // stored K x M; the view is its M x K transpose
    FakeBuffer b(8 * K * 4); // stored K x 4; the view is columns 1..2
    FakeBuffer c(8 * M * 4); // stored M x 4; the view is every other column
    for (std::size_t m = 0; m < M; ++m) {
        for (std::size_t k = 0; k < K; ++k) {
            a.set<double>(k * M + m, a_value(m, k));
        }
    }
    for (std::size_t k = 0; k < K; ++k) {
        for (std::size_t n = 0; n < N; ++n) {
            b.set<double>(k * 4 + n + 1, b_value(k, n));
        }
    }
    CallBuilder call("matmul");
    call.in(make_view(a, DataType::FLOAT64, {M, K}, {1, M}), a)
        .in(make_view(b, DataType::FLOAT64, {K, N}, {4, 1}, 8), b)
        .out(make_view(c, DataType::FLOAT64, {M, N}, {4, 2}), c);
    run(WorkerKind::CHIP, call);
    for (std::size_t m = 0; m < M; ++m) {
        for (std::size_t n = 0; n < N; ++n) {
            CHECK(c.get<double>(m * 4 + n * 2) == c_value(m, n, K));
            CHECK(c.get<std::uint64_t>(m * 4 + n * 2 + 1) == 0xEEEEEEEEEEEEEEEE);
        }
    }
}

TEST_CASE("matmul covers more columns than one accumulation block", "[kernels]") {
    constexpr std::size_t M = 2, K = 3, N = 300;
    FakeBuffer a(4 * M * K);
    FakeBuffer b(4 * K * N);
    FakeBuffer c(4 * M * N);
    for (std::size_t k = 0; k < M * K; ++k) {
        a.set<float>(k, static_cast<float>(a_value(k / K, k % K)));
    }
    for (std::size_t k = 0; k < K * N; ++k) {
        b.set<float>(k, static_cast<float>(b_value(k / N, k % N)));
    }
    CallBuilder call("matmul");
    call.in(make_view(a, DataType::FLOAT32, {M, K}), a)
        .in(make_view(b, DataType::FLOAT32, {K, N}), b)
        .out(make_view(c, DataType::FLOAT32, {M, N}), c);
    run(WorkerKind::CHIP, call);
    for (std::size_t m = 0; m < M; ++m) {
        for (std::size_t n = 0; n < N; ++n) {
            CHECK(c.get<float>(m * N + n) == static_cast<float>(c_value(m, n, K)));
        }
    }
}

TEST_CASE("matmul on float16 and bfloat16 accumulates in float and rounds once", "[kernels]") {
    // A = [1, 2^-11, 2^-11] (float16) times a column of ones: 1 + 2^-10 in float, exact in float16.
    FakeBuffer a(2 * 3);
    a.set<std::uint16_t>(0, 0x3C00);
    a.set<std::uint16_t>(1, 0x1000);
    a.set<std::uint16_t>(2, 0x1000);
    FakeBuffer b(2 * 3);
    for (std::size_t k = 0; k < 3; ++k) {
        b.set<std::uint16_t>(k, 0x3C00);
    }
    FakeBuffer c(2);
    CallBuilder call("matmul");
    call.in(make_view(a, DataType::FLOAT16, {1, 3}), a)
        .in(make_view(b, DataType::FLOAT16, {3, 1}), b)
        .out(make_view(c, DataType::FLOAT16, {1, 1}), c);
    run(WorkerKind::CHIP, call);
    CHECK(c.get<std::uint16_t>(0) == 0x3C01);

    // bfloat16 [[1, 2], [3, 4]] squared is [[7, 10], [15, 22]].
    FakeBuffer m(2 * 4);
    const std::uint16_t values[] = {0x3F80, 0x4000, 0x4040, 0x4080};
    for (std::size_t k = 0; k < 4; ++k) {
        m.set<std::uint16_t>(k, values[k]);
    }
    FakeBuffer sq(2 * 4);
    CallBuilder square("matmul");
    square.in(make_view(m, DataType::BFLOAT16, {2, 2}), m)
        .in(make_view(m, DataType::BFLOAT16, {2, 2}), m)
        .out(make_view(sq, DataType::BFLOAT16, {2, 2}), sq);
    run(WorkerKind::CHIP, square);
    CHECK(sq.get<std::uint16_t>(0) == 0x40E0);
    CHECK(sq.get<std::uint16_t>(1) == 0x4120);
    CHECK(sq.get<std::uint16_t>(2) == 0x4170);
    CHECK(sq.get<std::uint16_t>(3) == 0x41B0);
}

TEST_CASE("matmul rounds each product before adding it", "[kernels]") {
    // k = 0 puts -(1 + 2^-11) in the accumulator; k = 1 adds (1 + 2^-12)^2 = 1 + 2^-11 + 2^-24, which rounds to
    // 1 + 2^-11 first: the result is 0 where a fused multiply-add gives 2^-24.
    FakeBuffer a(4 * 2);
    a.set<float>(0, -(1.0f + 0x1p-11f));
    a.set<float>(1, 1.0f + 0x1p-12f);
    FakeBuffer b(4 * 2);
    b.set<float>(0, 1.0f);
    b.set<float>(1, 1.0f + 0x1p-12f);
    FakeBuffer c(4);
    CallBuilder call("matmul");
    call.in(make_view(a, DataType::FLOAT32, {1, 2}), a)
        .in(make_view(b, DataType::FLOAT32, {2, 1}), b)
        .out(make_view(c, DataType::FLOAT32, {1, 1}), c);
    run(WorkerKind::CHIP, call);
    CHECK(std::bit_cast<std::uint32_t>(c.get<float>(0)) == 0);
}

TEST_CASE("matmul refuses operands that are not 2-D", "[kernels]") {
    FakeBuffer buf(256);
    CallBuilder call("matmul");
    call.in(make_view(buf, DataType::FLOAT32, {2, 2, 1}), buf)
        .in(make_view(buf, DataType::FLOAT32, {2, 2}), buf)
        .out(make_view(buf, DataType::FLOAT32, {2, 2}, {}, 64), buf);
    require_check_error(WorkerKind::CHIP, call, ErrorCode::BAD_REQUEST,
                        "matmul: args[0] must be 2-D, has 3 dimensions");
}

TEST_CASE("matmul refuses integer dtypes and mixed dtypes", "[kernels]") {
    FakeBuffer buf(256);
    CallBuilder ints("matmul");
    ints.in(make_view(buf, DataType::INT32, {2, 2}), buf)
        .in(make_view(buf, DataType::INT32, {2, 2}), buf)
        .out(make_view(buf, DataType::INT32, {2, 2}, {}, 64), buf);
    require_check_error(WorkerKind::CHIP, ints, ErrorCode::BAD_REQUEST,
                        "matmul: args[0] has dtype int32, must be float32, float64, float16 or bfloat16");
    CallBuilder mixed("matmul");
    mixed.in(make_view(buf, DataType::FLOAT32, {2, 2}), buf)
        .in(make_view(buf, DataType::FLOAT32, {2, 2}), buf)
        .out(make_view(buf, DataType::FLOAT64, {2, 2}, {}, 64), buf);
    require_check_error(WorkerKind::CHIP, mixed, ErrorCode::BAD_REQUEST,
                        "matmul: args[2] has dtype float64, args[0] has float32");
}

TEST_CASE("matmul refuses shapes that do not agree", "[kernels]") {
    FakeBuffer buf(1024);
    CallBuilder inner("matmul");
    inner.in(make_view(buf, DataType::FLOAT32, {3, 4}), buf)
        .in(make_view(buf, DataType::FLOAT32, {5, 6}), buf)
        .out(make_view(buf, DataType::FLOAT32, {3, 6}, {}, 512), buf);
    require_check_error(WorkerKind::CHIP, inner, ErrorCode::BAD_REQUEST,
                        "matmul: args[1] has shape [5,6], args[0] has [3,4]: args[1].shapes[0] must equal "
                        "args[0].shapes[1]");
    CallBuilder outer("matmul");
    outer.in(make_view(buf, DataType::FLOAT32, {3, 4}), buf)
        .in(make_view(buf, DataType::FLOAT32, {4, 6}), buf)
        .out(make_view(buf, DataType::FLOAT32, {3, 5}, {}, 512), buf);
    require_check_error(WorkerKind::CHIP, outer, ErrorCode::BAD_REQUEST,
                        "matmul: args[2] has shape [3,5], must be [3,6]");
}
