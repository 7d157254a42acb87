// The cuda chip's vector kernels (16-byte loads and stores over contiguous written views) through real processes: a
// supervisor with a cuda chip on device 0 and a sim chip, every written byte compared with the sim chip's for the
// same inputs (kernel_cases.h, vector_cases.h). Every dtype, starts on and off 16-byte boundaries, counts of 1, 7,
// 8, 4096 + 3 and 2^24 + 5, inputs whose vectors coincide with the output's or not, and strided views that keep the
// strided kernels.
#include "vector_cases.h"

#include <catch2/catch.hpp>

using namespace canopy;
using namespace canopy::testing;
using daemon::ChildKind;
using daemon::Supervisor;

namespace {

constexpr std::uint32_t LONG_COUNT = (1u << 24) + 5;

void run_cases(Supervisor& sup, const std::vector<KernelCase>& cases, std::mt19937_64& rng, CaseStats& stats) {
    for (const KernelCase& c : cases) {
        compare_case(sup, {"/chip0"}, "/chip1", c, rng, stats);
    }
}

void check_all_wrote(const CaseStats& stats, int expected) {
    CHECK(stats.cases == expected);
    for (const auto& label : stats.unchanged) {
        WARN("unchanged: " << label);
    }
    CHECK(stats.changed == stats.cases);
}

} // namespace

TEST_CASE("element-wise kernels over contiguous views at every 16-byte alignment equal the sim chip's, byte for byte",
          "[cuda][chip][gpu][kernels]") {
    REQUIRE_GPUS(1);
    TempDir state;
    Supervisor sup(chip_options(state.path, {{ChildKind::CUDA_CHIP, 0}, {ChildKind::SIM_CHIP, 0}}));
    sup.start();
    std::mt19937_64 rng(16);
    CaseStats stats;
    int expected = 0;
    for (DataType dtype : all_dtypes()) {
        const auto cases = vector_cases(dtype, {1, 7, 8, 4096 + 3});
        run_cases(sup, cases, rng, stats);
        expected += static_cast<int>(cases.size());
    }
    check_all_wrote(stats, expected);
    CHECK(status_of(sup, "/chip0")->restarts == 0);
}

TEST_CASE("element-wise kernels over 2^24 + 5 contiguous elements equal the sim chip's, byte for byte",
          "[cuda][chip][gpu][kernels]") {
    REQUIRE_GPUS(1);
    TempDir state;
    Supervisor sup(chip_options(state.path, {{ChildKind::CUDA_CHIP, 0}, {ChildKind::SIM_CHIP, 0}}));
    sup.start();
    std::mt19937_64 rng(24);
    CaseStats stats;
    int expected = 0;
    // One dtype of each element size, and bfloat16 for the 16-bit conversions; test_vector_kernels.cpp runs every
    // dtype at this count on device memory.
    for (DataType dtype : {DataType::INT8, DataType::BFLOAT16, DataType::FLOAT32, DataType::FLOAT64}) {
        const auto cases = long_vector_cases(dtype, LONG_COUNT);
        run_cases(sup, cases, rng, stats);
        expected += static_cast<int>(cases.size());
    }
    check_all_wrote(stats, expected);
    CHECK(status_of(sup, "/chip0")->restarts == 0);
}

// The GPU cases above with the same seeds, so with the same inputs and reference results: every case is a valid
// call whose result differs from the buffer's old bytes (a count-1 axpy can leave its one element as it was).
// The long cases run with 100003 elements here.
TEST_CASE("the vector cases are valid calls that write, on two sim chips", "[cuda][chip]") {
    TempDir state;
    Supervisor sup(chip_options(state.path, {{ChildKind::SIM_CHIP, 0}, {ChildKind::SIM_CHIP, 1}}));
    sup.start();
    CaseStats stats;
    int expected = 0;
    std::mt19937_64 rng(16);
    for (DataType dtype : all_dtypes()) {
        const auto cases = vector_cases(dtype, {1, 7, 8, 4096 + 3});
        run_cases(sup, cases, rng, stats);
        expected += static_cast<int>(cases.size());
    }
    std::mt19937_64 long_rng(24);
    for (DataType dtype : all_dtypes()) {
        const auto cases = long_vector_cases(dtype, 100003);
        run_cases(sup, cases, long_rng, stats);
        expected += static_cast<int>(cases.size());
    }
    check_all_wrote(stats, expected);
}
