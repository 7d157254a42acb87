// The bounds within which a cuda chip's float reduce_sum and matmul agree with the CPU kernels
// (worker/kernels/bounds.h, docs/kernels.md): their constants, and that they hold for the CPU's own results
// against emulations of what a GPU does differently (a tree of double sums; blocked, fused and truncating float
// accumulation; TF32 operands) while staying tight enough to catch TF32 where it was not asked for.
#include "test_kernels_support.h"
#include "worker/kernels/bounds.h"
#include "worker/kernels/half.h"

#include <cmath>
#include <limits>
#include <random>

using namespace canopy;
using namespace canopy::kernels;
using namespace canopy::kernels::test;

namespace {

// A value of `dtype` as a double (float32 and float64 are stored, 16-bit floats as their bits).
double load(const FakeBuffer& b, DataType dtype, std::size_t i) {
    switch (dtype) {
    case DataType::FLOAT32:
        return b.get<float>(i);
    case DataType::FLOAT64:
        return b.get<double>(i);
    case DataType::FLOAT16:
        return float16_to_float(b.get<std::uint16_t>(i));
    default:
        return bfloat16_to_float(b.get<std::uint16_t>(i));
    }
}

void store(FakeBuffer& b, DataType dtype, std::size_t i, double v) {
    switch (dtype) {
    case DataType::FLOAT32:
        b.set<float>(i, static_cast<float>(v));
        return;
    case DataType::FLOAT64:
        b.set<double>(i, v);
        return;
    case DataType::FLOAT16:
        b.set<std::uint16_t>(i, double_to_float16(v));
        return;
    default:
        b.set<std::uint16_t>(i, double_to_bfloat16(v));
        return;
    }
}

// `v` rounded once to `dtype`, as a double.
double round_to(DataType dtype, double v) {
    FakeBuffer one(8);
    store(one, dtype, 0, v);
    return load(one, dtype, 0);
}

// The sum of xs as a tree of double additions over `leaves` interleaved sequential sums (the GPU's shape).
double tree_sum(const std::vector<double>& xs, std::size_t leaves) {
    std::vector<double> partial(leaves, 0.0);
    for (std::size_t i = 0; i < xs.size(); ++i) {
        partial[i % leaves] += xs[i];
    }
    while (partial.size() > 1) {
        std::vector<double> next((partial.size() + 1) / 2, 0.0);
        for (std::size_t i = 0; i < partial.size(); ++i) {
            next[i / 2] += partial[i];
        }
        partial = std::move(next);
    }
    return partial[0];
}

// float accumulation rounded toward zero, as a tensor core that truncates may do.
float add_truncating(float acc, float p) {
    const double exact = static_cast<double>(acc) + static_cast<double>(p);
    float r = static_cast<float>(exact);
    if (std::fabs(static_cast<double>(r)) > std::fabs(exact)) {
        r = std::nextafter(r, 0.0f);
    }
    return r;
}

// A float with its fraction cut to TF32's 10 bits.
float to_tf32(float v) {
    std::uint32_t bits;
    std::memcpy(&bits, &v, 4);
    bits &= 0xFFFFE000u;
    std::memcpy(&v, &bits, 4);
    return v;
}

} // namespace

TEST_CASE("each dtype's unit roundoff and smallest subnormal, and gamma", "[kernels][bounds]") {
    CHECK(unit_roundoff(DataType::FLOAT32) == std::ldexp(1.0, -24));
    CHECK(unit_roundoff(DataType::FLOAT64) == std::numeric_limits<double>::epsilon() / 2);
    CHECK(unit_roundoff(DataType::FLOAT16) == std::ldexp(1.0, -11));
    CHECK(unit_roundoff(DataType::BFLOAT16) == std::ldexp(1.0, -8));
    CHECK(unit_roundoff(DataType::INT32) == 0.0);
    CHECK(smallest_subnormal(DataType::FLOAT32) == static_cast<double>(std::numeric_limits<float>::denorm_min()));
    CHECK(smallest_subnormal(DataType::FLOAT64) == std::numeric_limits<double>::denorm_min());
    CHECK(smallest_subnormal(DataType::FLOAT16) == float16_to_float(1));
    CHECK(smallest_subnormal(DataType::BFLOAT16) == bfloat16_to_float(1));
    CHECK(gamma(0, 0.5) == 0.0);
    CHECK(gamma(3, 0.125) == 0.375 / 0.625);
    CHECK(std::isinf(gamma(4, 0.25)));
}

TEST_CASE("the reduce_sum bound: exact for integers, no final rounding for float64", "[kernels][bounds]") {
    CHECK(reduce_sum_bound(DataType::INT64, 1000, 1e9, 5, 7) == 0.0);
    const double u = std::ldexp(1.0, -53);
    CHECK(reduce_sum_bound(DataType::FLOAT64, 101, 10.0, 1.0, 1.0) == 2 * gamma(100, u) * 10.0);
    CHECK(reduce_sum_bound(DataType::FLOAT32, 1, 2.0, 2.0, 2.0) == std::ldexp(1.0, -24) * 4.0 + std::ldexp(1.0, -149));
    CHECK(reduce_sum_bound(DataType::BFLOAT16, 3, 3.0, -1.0, 1.0) ==
          2 * gamma(2, u) * 3.0 + std::ldexp(1.0, -8) * 2.0 + std::ldexp(1.0, -133));
}

TEST_CASE("a tree of double sums stays within the reduce_sum bound of the CPU's result, within about an ulp",
          "[kernels][bounds]") {
    std::mt19937_64 rng(42);
    std::uniform_real_distribution<double> unit(-1.0, 1.0);
    for (DataType dtype : {DataType::FLOAT32, DataType::FLOAT64, DataType::FLOAT16, DataType::BFLOAT16}) {
        INFO(to_string(dtype));
        const std::size_t size = element_size(dtype);
        for (std::size_t n : {1u, 2u, 17u, 1000u, 100003u}) {
            FakeBuffer x(n * size);
            FakeBuffer y(8);
            std::vector<double> xs(n);
            double sum_abs = 0.0;
            for (std::size_t i = 0; i < n; ++i) {
                const double scale =
                    dtype == DataType::FLOAT16 ? 4.0 : std::ldexp(1.0, static_cast<int>(rng() % 21) - 10);
                store(x, dtype, i, unit(rng) * scale);
                xs[i] = load(x, dtype, i);
                sum_abs += std::fabs(xs[i]);
            }
            CallBuilder call("reduce_sum");
            call.in(make_view(x, dtype, {static_cast<std::uint32_t>(n)}), x).out(make_view(y, dtype, {1}), y);
            run(WorkerKind::CHIP, call);
            const double cpu = load(y, dtype, 0);
            for (std::size_t leaves : {1u, 7u, 256u, 135168u}) {
                const double gpu = round_to(dtype, tree_sum(xs, leaves));
                const double bound = reduce_sum_bound(dtype, n, sum_abs, gpu, cpu);
                INFO("n " << n << ", " << leaves << " leaves: " << gpu << " vs " << cpu << ", bound " << bound);
                CHECK(std::fabs(gpu - cpu) <= bound);
                if (dtype != DataType::FLOAT64 && cpu != 0.0) {
                    // Little more than one rounding to the dtype on each side.
                    CHECK(bound <= 2.5 * unit_roundoff(dtype) * std::fabs(cpu) + 2 * smallest_subnormal(dtype) +
                                       4 * gamma(n, std::ldexp(1.0, -53)) * sum_abs);
                }
            }
        }
    }
}

TEST_CASE("blocked, fused and truncating accumulations stay within the matmul bound of the CPU's result",
          "[kernels][bounds]") {
    std::mt19937_64 rng(7);
    std::uniform_real_distribution<double> unit(-4.0, 4.0);
    constexpr std::uint32_t M = 6, K = 777, N = 5;
    for (DataType dtype : {DataType::FLOAT32, DataType::FLOAT64, DataType::FLOAT16, DataType::BFLOAT16}) {
        INFO(to_string(dtype));
        const std::size_t size = element_size(dtype);
        FakeBuffer a(M * K * size), b(K * N * size), c(M * N * size);
        for (std::size_t i = 0; i < M * K; ++i) {
            store(a, dtype, i, unit(rng));
        }
        for (std::size_t i = 0; i < K * N; ++i) {
            store(b, dtype, i, unit(rng));
        }
        CallBuilder call("matmul");
        call.in(make_view(a, dtype, {M, K}), a).in(make_view(b, dtype, {K, N}), b).out(make_view(c, dtype, {M, N}), c);
        run(WorkerKind::CHIP, call);
        for (std::uint32_t m = 0; m < M; ++m) {
            for (std::uint32_t n = 0; n < N; ++n) {
                double sum_abs = 0.0;
                double fused = 0.0; // 4 interleaved FMA chains in the accumulator, then added
                double chains[4] = {0, 0, 0, 0};
                float truncated = 0.0f;
                for (std::uint32_t k = 0; k < K; ++k) {
                    const double x = load(a, dtype, m * K + k);
                    const double y = load(b, dtype, k * N + n);
                    sum_abs += std::fabs(x * y);
                    double& chain = chains[k % 4];
                    chain = dtype == DataType::FLOAT64
                                ? std::fma(x, y, chain)
                                : static_cast<double>(std::fma(static_cast<float>(x), static_cast<float>(y),
                                                               static_cast<float>(chain)));
                    truncated = add_truncating(truncated, static_cast<float>(x * y));
                }
                for (double chain : chains) {
                    fused = dtype == DataType::FLOAT64
                                ? fused + chain
                                : static_cast<double>(static_cast<float>(fused) + static_cast<float>(chain));
                }
                const double cpu = load(c, dtype, m * N + n);
                for (double gpu : {round_to(dtype, fused), round_to(dtype, truncated)}) {
                    if (dtype == DataType::FLOAT64 && gpu == round_to(dtype, truncated)) {
                        continue; // the truncating emulation is float's
                    }
                    INFO("C[" << m << "," << n << "] " << gpu << " vs " << cpu);
                    CHECK(std::fabs(gpu - cpu) <= matmul_bound(dtype, K, false, sum_abs, gpu, cpu));
                }
            }
        }
    }
}

TEST_CASE("TF32 operands stay within the TF32 bound and, where they need more bits, beyond the float32 bound",
          "[kernels][bounds]") {
    std::mt19937_64 rng(3);
    constexpr std::uint32_t M = 4, K = 64, N = 4;
    FakeBuffer a(M * K * 4), b(K * N * 4), c(M * N * 4);
    for (std::size_t i = 0; i < M * K; ++i) {
        a.set<float>(i, 1.0f + std::ldexp(static_cast<float>(1 + rng() % 7), -14));
    }
    for (std::size_t i = 0; i < K * N; ++i) {
        b.set<float>(i, 1.0f + std::ldexp(static_cast<float>(1 + rng() % 7), -14));
    }
    CallBuilder call("matmul");
    call.in(make_view(a, DataType::FLOAT32, {M, K}), a)
        .in(make_view(b, DataType::FLOAT32, {K, N}), b)
        .out(make_view(c, DataType::FLOAT32, {M, N}), c);
    run(WorkerKind::CHIP, call);
    for (std::uint32_t m = 0; m < M; ++m) {
        for (std::uint32_t n = 0; n < N; ++n) {
            double sum_abs = 0.0;
            float tf32 = 0.0f;
            for (std::uint32_t k = 0; k < K; ++k) {
                const float x = a.get<float>(m * K + k);
                const float y = b.get<float>(k * N + n);
                sum_abs += std::fabs(static_cast<double>(x) * y);
                tf32 = std::fma(to_tf32(x), to_tf32(y), tf32);
            }
            const double cpu = c.get<float>(m * N + n);
            const double gpu = tf32;
            CHECK(std::fabs(gpu - cpu) <= matmul_bound(DataType::FLOAT32, K, true, sum_abs, gpu, cpu));
            CHECK(std::fabs(gpu - cpu) > matmul_bound(DataType::FLOAT32, K, false, sum_abs, gpu, cpu));
        }
    }
}
