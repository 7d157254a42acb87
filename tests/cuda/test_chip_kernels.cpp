// Every element-wise built-in and integer reduce_sum on a cuda chip, through real processes (a supervisor with a
// cuda chip on device 0 and a sim chip), compared byte for byte with the sim chip's results for the same inputs:
// all 9 dtypes, contiguous and strided views. Float reduce_sum and matmul agree within a bound instead:
// test_chip_bounds.cpp.
#include "kernel_cases.h"

#include <catch2/catch.hpp>

using namespace canopy;
using namespace canopy::testing;
using daemon::ChildKind;
using daemon::Supervisor;

TEST_CASE("element-wise kernels and integer reduce_sum on a cuda chip equal the sim chip's, byte for byte",
          "[cuda][chip][gpu][kernels]") {
    REQUIRE_GPUS(1);
    TempDir state;
    std::optional<Supervisor> holder;
    Supervisor& sup = cuda_and_sim(state, holder);
    std::mt19937_64 rng(20261129);
    CaseStats stats;
    int expected = 0;
    for (DataType dtype : all_dtypes()) {
        for (const KernelCase& c : elementwise_cases(dtype)) {
            compare_case(sup, {"/chip0"}, "/chip1", c, rng, stats);
            ++expected;
        }
        if (!is_float(dtype)) {
            for (const KernelCase& c : reduce_cases(dtype)) {
                compare_case(sup, {"/chip0"}, "/chip1", c, rng, stats);
                ++expected;
            }
        }
    }
    CHECK(stats.cases == expected);
    for (const auto& label : stats.unchanged) {
        WARN("unchanged: " << label);
    }
    CHECK(stats.changed == stats.cases);
    CHECK(status_of(sup, "/chip0")->restarts == 0);
}

TEST_CASE("large views on a cuda chip: grid-stride loops, long integer sums", "[cuda][chip][gpu][kernels]") {
    REQUIRE_GPUS(1);
    TempDir state;
    std::optional<Supervisor> holder;
    Supervisor& sup = cuda_and_sim(state, holder);
    std::mt19937_64 rng(3);
    CaseStats stats;
    const auto in = TensorTag::INPUT;
    const auto out = TensorTag::OUTPUT;
    const auto inout = TensorTag::INOUT;
    const ViewSpec big{{3'000'017}, {}, 1};
    const ViewSpec big_strided{{1001, 1500}, {3001, 2}, 5};
    const std::vector<KernelCase> cases{
        {"fill", DataType::FLOAT32, {{big, out}}, {ScalarArg::f32(0.5f)}, Values::GENERAL, "3M"},
        {"iota", DataType::INT8, {{big, out}}, {}, Values::GENERAL, "3M saturating"},
        {"iota", DataType::FLOAT16, {{big, out}}, {}, Values::GENERAL, "3M to infinity"},
        {"scale",
         DataType::FLOAT32,
         {{big_strided, inout}},
         {ScalarArg::f64(1.0 / 3.0)},
         Values::GENERAL,
         "1.5M strided"},
        {"axpy", DataType::BFLOAT16, {{big, in}, {big, inout}}, {ScalarArg::f32(-1.5f)}, Values::GENERAL, "3M"},
        {"copy",
         DataType::INT64,
         {{big_strided, in}, {ViewSpec{{1'501'500}, {}, 0}, out}},
         {},
         Values::GENERAL,
         "1.5M strided"},
        {"reduce_sum", DataType::INT32, {{big, in}, {ViewSpec{{1}}, out}}, {}, Values::GENERAL, "3M wrapping"},
        {"reduce_sum",
         DataType::INT64,
         {{big_strided, in}, {ViewSpec{{1}}, out}},
         {},
         Values::GENERAL,
         "1.5M strided wrapping"},
    };
    for (const KernelCase& c : cases) {
        compare_case(sup, {"/chip0"}, "/chip1", c, rng, stats);
    }
    CHECK(stats.changed == stats.cases);
}

TEST_CASE("a cuda chip serves read-only inputs, reused buffers and released slots", "[cuda][chip][gpu]") {
    REQUIRE_GPUS(1);
    TempDir state;
    std::optional<Supervisor> holder;
    Supervisor& sup = cuda_and_sim(state, holder);
    for (int round = 0; round < 4; ++round) {
        INFO("round " << round);
        const auto ro = shm_buffer(sup, 4096, Access::READ);
        const auto rw = shm_buffer(sup, 4096);
        auto ro_map = map_shm(ro);
        auto rw_map = map_shm(rw);
        auto* src = reinterpret_cast<std::int32_t*>(ro_map.data());
        for (int i = 0; i < 1024; ++i) {
            src[i] = i * (round + 1);
        }
        for (int use = 0; use < 3; ++use) {
            REQUIRE(sup.run(task("copy", "chip0",
                                 {{make_tensor(ro, DataType::INT32, {1024}), TensorTag::INPUT},
                                  {make_tensor(rw, DataType::INT32, {1024}), TensorTag::OUTPUT}}))
                        .ok());
            REQUIRE(std::memcmp(ro_map.data(), rw_map.data(), 4096) == 0);
            REQUIRE(sup.run(task("scale", "chip0", {{make_tensor(rw, DataType::INT32, {1024}), TensorTag::INOUT}},
                                 {ScalarArg::i64(2)}))
                        .ok());
            REQUIRE(reinterpret_cast<const std::int32_t*>(rw_map.data())[1023] == 2 * 1023 * (round + 1));
        }
        // A write through a read-only grant is refused before it reaches the chip.
        const auto denied = sup.run(
            task("fill", "chip0", {{make_tensor(ro, DataType::INT32, {4}), TensorTag::OUTPUT}}, {ScalarArg::i64(1)}));
        CHECK(denied.code == ErrorCode::ACCESS_DENIED);
        REQUIRE(!sup.release_buffer(ro.identity));
        REQUIRE(!sup.release_buffer(rw.identity));
    }
    CHECK(status_of(sup, "/chip0")->restarts == 0);
}

TEST_CASE("the comparison harness itself: two sim chips agree on every case and the cases write", "[cuda][chip]") {
    TempDir state;
    Supervisor sup(chip_options(state.path, {{ChildKind::SIM_CHIP, 0}, {ChildKind::SIM_CHIP, 1}}));
    sup.start();
    std::mt19937_64 rng(20261129);
    CaseStats stats;
    for (DataType dtype : all_dtypes()) {
        for (const KernelCase& c : elementwise_cases(dtype)) {
            compare_case(sup, {"/chip0"}, "/chip1", c, rng, stats);
        }
    }
    for (const KernelCase& c : reduce_cases(DataType::FLOAT32)) {
        compare_case(sup, {"/chip0"}, "/chip1", c, rng, stats);
    }
    for (const KernelCase& c : matmul_cases(DataType::BFLOAT16)) {
        compare_case(sup, {"/chip0"}, "/chip1", c, rng, stats);
    }
    for (const auto& label : stats.unchanged) {
        WARN("unchanged: " << label);
    }
    CHECK(stats.changed == stats.cases);
}
