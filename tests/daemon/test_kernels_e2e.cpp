// Every built-in kernel through real worker processes, on every worker kind that offers it, contiguous
// and strided, against references computed here.
#include "fixture.h"

#include <catch2/catch.hpp>
#include <random>

using namespace canopy;
using namespace canopy::testing;
using daemon::Supervisor;

namespace {

constexpr std::uint32_t M = 6, K = 5, N = 4;

struct Views {
    bool strided;
    // x: M*K floats; y: M*K floats; as 2-D [M, K] views. Strided views take every other column of a
    // [M, 2K] matrix at an offset of one element.
    TensorArg x(const BufferDescriptor& d, TensorTag tag) const {
        return strided ? arg(d, tag, DataType::FLOAT32, {M, K}, {2 * K, 2}, 4) : arg(d, tag, DataType::FLOAT32, {M, K});
    }
    std::size_t index(std::uint32_t r, std::uint32_t c) const { return strided ? 1 + r * 2 * K + 2 * c : r * K + c; }
};

void run_checks(Supervisor& sup, const std::string& worker, bool chip, const Views& views) {
    INFO(worker << (views.strided ? " strided" : " contiguous"));
    const std::size_t cap = 2 * M * K + 2;
    const auto bx = sup.create_buffer({cap * 4, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    const auto by = sup.create_buffer({cap * 4, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    auto mx = map_shm(bx);
    auto my = map_shm(by);
    auto* x = reinterpret_cast<float*>(mx.data());
    auto* y = reinterpret_cast<float*>(my.data());
    std::mt19937 rng(7);
    std::uniform_real_distribution<float> dist(-4, 4);
    for (std::size_t i = 0; i < cap; ++i) {
        x[i] = dist(rng);
        y[i] = dist(rng);
    }
    const std::vector<float> x0(x, x + cap), y0(y, y + cap);

    REQUIRE(sup.run(task("copy", worker, {views.x(bx, TensorTag::INPUT), views.x(by, TensorTag::OUTPUT)})).ok());
    for (std::uint32_t r = 0; r < M; ++r) {
        for (std::uint32_t c = 0; c < K; ++c) {
            REQUIRE(y[views.index(r, c)] == x0[views.index(r, c)]);
        }
    }
    std::memcpy(y, y0.data(), cap * 4);
    REQUIRE(sup.run(task("axpy", worker, {views.x(bx, TensorTag::INPUT), views.x(by, TensorTag::INOUT)},
                         {ScalarArg::f32(0.5f)}))
                .ok());
    for (std::uint32_t r = 0; r < M; ++r) {
        for (std::uint32_t c = 0; c < K; ++c) {
            const std::size_t i = views.index(r, c);
            const float product = 0.5f * x0[i];
            REQUIRE(y[i] == product + y0[i]);
        }
    }
    REQUIRE(sup.run(task("scale", worker, {views.x(bx, TensorTag::INOUT)}, {ScalarArg::f32(-2.0f)})).ok());
    REQUIRE(sup.run(task("reduce_sum", worker,
                         {views.x(bx, TensorTag::INPUT), arg(by, TensorTag::OUTPUT, DataType::FLOAT32, {1})}))
                .ok());
    double sum = 0;
    for (std::uint32_t r = 0; r < M; ++r) {
        for (std::uint32_t c = 0; c < K; ++c) {
            REQUIRE(x[views.index(r, c)] == -2.0f * x0[views.index(r, c)]);
            sum += static_cast<double>(x[views.index(r, c)]);
        }
    }
    CHECK(y[0] == static_cast<float>(sum));
    REQUIRE(sup.run(task("iota", worker, {views.x(by, TensorTag::OUTPUT)})).ok());
    REQUIRE(sup.run(task("fill", worker, {views.x(bx, TensorTag::OUTPUT)}, {ScalarArg::i64(3)})).ok());
    for (std::uint32_t r = 0; r < M; ++r) {
        for (std::uint32_t c = 0; c < K; ++c) {
            REQUIRE(y[views.index(r, c)] == static_cast<float>(r * K + c));
            REQUIRE(x[views.index(r, c)] == 3.0f);
        }
    }
    if (!chip) {
        CHECK(sup.run(task("matmul", worker, {})).code == ErrorCode::UNKNOWN_KERNEL);
        return;
    }
    // C[M,N] = A[M,K] . B[K,N] with A strided or not, B transposed-view (strides {1, K}) over a K*N block.
    for (std::size_t i = 0; i < cap; ++i) {
        x[i] = dist(rng);
        y[i] = dist(rng);
    }
    const auto bc = sup.create_buffer({M * N * 4, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    auto mc = map_shm(bc);
    REQUIRE(sup.run(task("matmul", worker,
                         {views.x(bx, TensorTag::INPUT), arg(by, TensorTag::INPUT, DataType::FLOAT32, {K, N}, {1, K}),
                          arg(bc, TensorTag::OUTPUT, DataType::FLOAT32, {M, N})}))
                .ok());
    const auto c = floats(mc, M * N);
    for (std::uint32_t r = 0; r < M; ++r) {
        for (std::uint32_t col = 0; col < N; ++col) {
            double ref = 0;
            for (std::uint32_t k = 0; k < K; ++k) {
                ref += static_cast<double>(x[views.index(r, k)]) * static_cast<double>(y[k + col * K]);
            }
            REQUIRE(c[r * N + col] == Approx(ref).epsilon(1e-5));
        }
    }
}

} // namespace

TEST_CASE("every built-in kernel is right on sim chips and subs of an L3", "[daemon][kernels]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 2, 2));
    sup.start();
    for (bool strided : {false, true}) {
        for (const char* w : {"chip0", "chip1"}) {
            run_checks(sup, w, true, {strided});
        }
        for (const char* w : {"sub0", "sub1"}) {
            run_checks(sup, w, false, {strided});
        }
    }
}

TEST_CASE("every built-in kernel is right on the workers of an L4's nested nodes", "[daemon][kernels]") {
    TempDir state;
    Supervisor sup(l4_options(state.path, 2, 1));
    sup.start();
    for (bool strided : {false, true}) {
        run_checks(sup, "/sub0", false, {strided});
        run_checks(sup, "/node0/chip1", true, {strided});
        run_checks(sup, "/node1/chip0", true, {strided});
        run_checks(sup, "/node1/sub1", false, {strided});
    }
}
