// Float reduce_sum (a two-pass tree) and matmul (cuBLASLt) on a cuda chip, through real processes, against the
// sim chip within the bounds docs/kernels.md states, for every dtype (integer sums bit for bit); the same task
// twice gives the same bits; float32 uses TF32 only when the task's launch asks; views that fit no cuBLASLt
// layout, and a chip that cannot load cuBLASLt, run canopy's own kernel, whose results are the sim chip's bit
// for bit.
#include "bound_cases.h"

#include <catch2/catch.hpp>
#include <fstream>
#include <sstream>

using namespace canopy;
using namespace canopy::testing;
using daemon::ChildKind;
using daemon::Supervisor;

namespace {

const std::vector<DataType> FLOATS{DataType::FLOAT32, DataType::FLOAT64, DataType::FLOAT16, DataType::BFLOAT16};

// Values whose products stay finite in every dtype (float16's range ends at 65504).
Values moderate(DataType dtype) {
    return dtype == DataType::FLOAT16 ? Values::SMALL : Values::FINITE;
}

// matmul cases that cuBLASLt runs: every combination of row- and column-major operands, padded leading
// dimensions, offsets, degenerate shapes, and sizes past one tile.
std::vector<KernelCase> lt_matmul_cases(DataType dtype) {
    const auto in = TensorTag::INPUT;
    const auto out = TensorTag::OUTPUT;
    const Values v = moderate(dtype);
    constexpr std::uint32_t M = 37, K = 61, N = 29;
    return {
        {"matmul", dtype, {{{{M, K}}, in}, {{{K, N}}, in}, {{{M, N}}, out}}, {}, v, "37x61x29 row-major"},
        {"matmul",
         dtype,
         {{{{M, K}, {1, M}, 3}, in}, {{{K, N}, {1, K}, 0}, in}, {{{M, N}, {N + 3, 1}, 2}, TensorTag::INOUT}},
         {},
         v,
         "column-major A and B, padded C"},
        {"matmul",
         dtype,
         {{{{M, K}, {K + 5, 1}, 1}, in}, {{{K, N}}, in}, {{{M, N}, {1, M + 2}, 1}, out}},
         {},
         v,
         "padded A, column-major C"},
        {"matmul", dtype, {{{{M, 1}}, in}, {{{1, N}}, in}, {{{M, N}}, out}}, {}, v, "K = 1"},
        {"matmul", dtype, {{{{1, K}}, in}, {{{K, N}}, in}, {{{1, N}, {1, 1}, 0}, out}}, {}, v, "one row"},
        {"matmul", dtype, {{{{130, 257}}, in}, {{{257, 70}}, in}, {{{130, 70}}, out}}, {}, v, "130x257x70"},
        {"matmul", dtype, {{{{300, 500}}, in}, {{{500, 400}}, in}, {{{300, 400}}, out}}, {}, v, "300x500x400"},
        {"matmul",
         dtype,
         {{{{70, 1000}}, in}, {{{1000, 90}, {1, 1000}}, in}, {{{70, 90}}, out}},
         {},
         v,
         "70x1000x90, transposed B"},
    };
}

// Redirects this process's stderr, and so that of every process forked while it lives (the supervisor's zygote
// and its workers), to a file; restores it on destruction.
class StderrCapture {
public:
    StderrCapture() {
        char tmpl[] = "/tmp/canopy-stderr-XXXXXX";
        fd_ = ::mkstemp(tmpl);
        path_ = tmpl;
        saved_ = ::dup(2);
        ::dup2(fd_, 2);
    }
    ~StderrCapture() {
        ::dup2(saved_, 2);
        ::close(saved_);
        ::close(fd_);
        ::unlink(path_.c_str());
    }
    StderrCapture(const StderrCapture&) = delete;
    StderrCapture& operator=(const StderrCapture&) = delete;

    std::string text() const {
        std::ifstream in(path_);
        std::ostringstream s;
        s << in.rdbuf();
        return s.str();
    }

private:
    int fd_ = -1;
    int saved_ = -1;
    std::string path_;
};

std::size_t occurrences(const std::string& text, const std::string& what) {
    std::size_t n = 0;
    for (std::size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + what.size())) {
        ++n;
    }
    return n;
}

} // namespace

TEST_CASE("reduce_sum on a cuda chip agrees with the sim chip within the stated bound, integers bit for bit",
          "[cuda][chip][gpu][kernels]") {
    REQUIRE_GPUS(1);
    TempDir state;
    std::optional<Supervisor> holder;
    Supervisor& sup = cuda_and_sim(state, holder);
    std::mt19937_64 rng(20261202);
    for (DataType dtype : all_dtypes()) {
        BoundStats stats;
        std::vector<KernelCase> cases = reduce_cases(dtype);
        cases.push_back({"reduce_sum",
                         dtype,
                         {{ViewSpec{{1001, 1500}, {3001, 2}, 5}, TensorTag::INPUT}, {ViewSpec{{1}}, TensorTag::OUTPUT}},
                         {},
                         moderate(dtype),
                         "1.5M strided"});
        for (const KernelCase& c : cases) {
            compare_within_bound(sup, "/chip0", "/chip1", c, rng, stats);
        }
        CHECK(stats.cases == static_cast<int>(cases.size()));
        WARN("reduce_sum " << to_string(dtype) << ": " << stats.cases << " cases, " << stats.differing
                           << " results differ from the sim chip's, worst |difference| / bound " << stats.worst);
    }
    CHECK(status_of(sup, "/chip0")->restarts == 0);
}

TEST_CASE("matmul on a cuda chip agrees with the sim chip within the stated bound for every float dtype",
          "[cuda][chip][gpu][kernels]") {
    REQUIRE_GPUS(1);
    TempDir state;
    std::optional<Supervisor> holder;
    Supervisor& sup = cuda_and_sim(state, holder);
    std::mt19937_64 rng(7);
    for (DataType dtype : FLOATS) {
        BoundStats stats;
        for (const KernelCase& c : lt_matmul_cases(dtype)) {
            compare_within_bound(sup, "/chip0", "/chip1", c, rng, stats);
        }
        WARN("matmul " << to_string(dtype) << ": " << stats.elements << " elements, " << stats.differing
                       << " differ from the sim chip's, worst |difference| / bound " << stats.worst);
        // cuBLASLt ran: its order differs from the tiled kernel's, which would equal the sim chip everywhere.
        CHECK(stats.differing > 0);
    }
    CHECK(status_of(sup, "/chip0")->restarts == 0);
}

TEST_CASE("matmul views that fit no cuBLASLt layout run canopy's kernel, bit for bit the sim chip's",
          "[cuda][chip][gpu][kernels]") {
    REQUIRE_GPUS(1);
    TempDir state;
    std::optional<Supervisor> holder;
    Supervisor& sup = cuda_and_sim(state, holder);
    std::mt19937_64 rng(11);
    CaseStats stats;
    const auto in = TensorTag::INPUT;
    const auto out = TensorTag::OUTPUT;
    constexpr std::uint32_t M = 37, K = 61, N = 29;
    for (DataType dtype : FLOATS) {
        const Values v = moderate(dtype);
        const std::vector<KernelCase> cases{
            {"matmul",
             dtype,
             {{{{M, K}, {2 * K, 2}, 1}, in}, {{{K, N}}, in}, {{{M, N}}, out}},
             {},
             v,
             "A with inner stride 2"},
            {"matmul",
             dtype,
             {{{{M, K}}, in}, {{{K, N}, {3 * N, 3}, 0}, in}, {{{M, N}}, out}},
             {},
             v,
             "B with inner stride 3"},
            {"matmul",
             dtype,
             {{{{M, K}}, in}, {{{K, N}}, in}, {{{M, N}, {2 * N, 2}, 1}, out}},
             {},
             v,
             "C with inner stride 2"},
            {"matmul",
             dtype,
             {{{{M, K}, {4, 1}, 0}, in}, {{{K, N}}, in}, {{{M, N}}, out}},
             {},
             v,
             "A with overlapping rows"},
        };
        for (const KernelCase& c : cases) {
            compare_case(sup, {"/chip0"}, "/chip1", c, rng, stats);
        }
    }
    CHECK(stats.cases == 16);
    CHECK(stats.changed == stats.cases);
}

TEST_CASE("the same matmul or reduce_sum twice on a cuda chip gives the same bits", "[cuda][chip][gpu][kernels]") {
    REQUIRE_GPUS(1);
    TempDir state;
    std::optional<Supervisor> holder;
    Supervisor& sup = cuda_and_sim(state, holder);
    std::mt19937_64 rng(5);
    const auto in = TensorTag::INPUT;
    const auto out = TensorTag::OUTPUT;
    std::vector<KernelCase> cases;
    for (DataType dtype : FLOATS) {
        const Values v = moderate(dtype);
        cases.push_back(
            {"matmul", dtype, {{{{512, 1024}}, in}, {{{1024, 384}}, in}, {{{512, 384}}, out}}, {}, v, "512x1024x384"});
        cases.push_back({"matmul",
                         dtype,
                         {{{{64, 4096}}, in}, {{{4096, 48}, {1, 4096}}, in}, {{{64, 48}}, out}},
                         {},
                         v,
                         "64x4096x48, transposed B (long K)"});
        cases.push_back(
            {"reduce_sum", dtype, {{ViewSpec{{(1u << 22) + 5}, {}, 1}, in}, {ViewSpec{{1}}, out}}, {}, v, "2^22 + 5"});
        cases.push_back({"reduce_sum",
                         dtype,
                         {{ViewSpec{{1001, 1500}, {3001, 2}, 5}, in}, {ViewSpec{{1}}, out}},
                         {},
                         v,
                         "1.5M strided"});
    }
    for (const KernelCase& c : cases) {
        INFO(describe(c));
        CaseRun run(sup, c, 3, rng);
        run.require_run("/chip1", 2);
        run.require_run("/chip0", 0);
        run.require_run("/chip0", 1);
        const std::size_t result = c.args.size() - 1;
        CHECK(std::memcmp(run.bytes(result, 0), run.bytes(result, 1), run.size(result)) == 0);
        BoundStats stats;
        if (c.kernel == "matmul") {
            check_matmul_bound(run, 0, 2, false, stats);
        } else {
            check_reduce_bound(run, 0, 2, stats);
        }
    }
}

TEST_CASE("float32 matmul uses TF32 only when the launch asks: off within the float32 bound, on within TF32's",
          "[cuda][chip][gpu][kernels]") {
    REQUIRE_GPUS(1);
    TempDir state;
    std::optional<Supervisor> holder;
    Supervisor& sup = cuda_and_sim(state, holder);
    std::mt19937_64 rng(32);
    constexpr std::uint32_t M = 256, K = 64, N = 256;
    const KernelCase c{"matmul",
                       DataType::FLOAT32,
                       {{{{M, K}}, TensorTag::INPUT}, {{{K, N}}, TensorTag::INPUT}, {{{M, N}}, TensorTag::OUTPUT}},
                       {},
                       Values::SMALL,
                       "256x64x256 of 1 + j 2^-14"};
    // Operands 1 + j 2^-14 (j in 1..7) need 14 fraction bits; TF32 keeps 10, so it rounds every one to 1.
    const Filler filler = [&](std::size_t arg, std::span<std::byte> bytes) {
        for (std::size_t at = 0; at + 4 <= bytes.size(); at += 4) {
            const float v = arg == 2 ? 0.0f : 1.0f + std::ldexp(static_cast<float>(1 + rng() % 7), -14);
            std::memcpy(&bytes[at], &v, 4);
        }
    };
    CaseRun run(sup, c, 3, rng, filler);
    run.require_run("/chip1", 2);
    run.require_run("/chip0", 0);
    run.require_run("/chip0", 1, BUILTIN_LAUNCH_TF32);
    BoundStats off;
    BoundStats on;
    check_matmul_bound(run, 0, 2, false, off);
    check_matmul_bound(run, 1, 2, true, on);
    // With TF32 the results are observably TF32's: outside the float32 bound.
    std::uint64_t beyond_fp32 = 0;
    for (std::size_t at = 0; at + 4 <= run.size(2); at += 4) {
        const double got = element_value(run.bytes(2, 1) + at, DataType::FLOAT32);
        const double want = element_value(run.bytes(2, 2) + at, DataType::FLOAT32);
        const double bound = kernels::matmul_bound(DataType::FLOAT32, K, false, std::fabs(want), got, want);
        beyond_fp32 += std::fabs(got - want) > bound ? 1 : 0;
    }
    WARN("tf32 off: worst |difference| / float32 bound " << off.worst << "; tf32 on: worst / TF32 bound " << on.worst
                                                         << ", " << beyond_fp32 << " of " << M * N
                                                         << " elements beyond the float32 bound");
    CHECK(beyond_fp32 > 0);
    // TF32 on a matmul of another dtype, or on another kernel, is refused at submit.
    KernelCase bf16 = c;
    bf16.dtype = DataType::BFLOAT16;
    CaseRun refused(sup, bf16, 1, rng);
    const auto r = refused.run("/chip0", 0, BUILTIN_LAUNCH_TF32);
    CHECK(r.code == ErrorCode::BAD_REQUEST);
    CHECK(r.message == "matmul: launch.tf32 applies to float32 only; args[0] has dtype bfloat16");
}

TEST_CASE("a cuda chip that cannot load cuBLASLt runs matmul on canopy's kernel, bit for bit, and says so once",
          "[cuda][chip][gpu][kernels]") {
    REQUIRE_GPUS(1);
    const StderrCapture capture;
    const ScopedEnv missing("CANOPY_CUBLASLT", "/nonexistent/libcublasLt.so.13");
    {
        TempDir state;
        std::optional<Supervisor> holder;
        Supervisor& sup = cuda_and_sim(state, holder);
        std::mt19937_64 rng(13);
        CaseStats stats;
        for (DataType dtype : FLOATS) {
            for (const KernelCase& c : matmul_cases(dtype)) {
                compare_case(sup, {"/chip0"}, "/chip1", c, rng, stats);
            }
        }
        CHECK(stats.changed == stats.cases);
        sup.stop();
    }
    const std::string log = capture.text();
    INFO("stderr: " << log);
    CHECK(occurrences(log, "cuda chip /chip0: cuBLASLt is unavailable, so matmul runs on canopy's own kernel") == 1);
    CHECK(occurrences(log, "cuBLASLt is unavailable") == 1);
    CHECK(log.find("cannot load cuBLASLt (/nonexistent/libcublasLt.so.13: ") != std::string::npos);
}
