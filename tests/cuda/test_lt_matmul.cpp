// matmul through cuBLASLt: the mapping of views onto its column-major layouts, the algorithm cache's key and the
// library loader, on any machine ([cuda]); then LtMatmul in this process on device 0 ([gpu]): one heuristic per
// key, the same bits twice, results within docs/kernels.md's bound of the CPU's, and the fallback when the
// library cannot be loaded.
#include "cuda/blas_lt.h"
#include "cuda/memory.h"
#include "cuda/stream.h"
#include "protocol/builtin_launch.h"
#include "tests/cuda/gpu_context.h"
#include "worker/cuda/lt_matmul.h"
#include "worker/cuda/matmul_plan.h"
#include "worker/kernels/bounds.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <unordered_set>

using namespace canopy;
using namespace canopy::worker;

namespace {

BufferDescriptor some_buffer() {
    CanonicalIdentity id{};
    id.owner_instance = draw_owner_instance();
    id.buffer_id = 1;
    id.generation = 1;
    return make_posix_shm_descriptor(id, std::uint64_t{1} << 30, Access::READWRITE, "cnpy-plan");
}

Tensor matrix(std::uint32_t rows, std::uint32_t cols, std::uint32_t s0, std::uint32_t s1,
              DataType dtype = DataType::FLOAT32, std::uint64_t offset = 0) {
    Tensor t = make_tensor(some_buffer(), dtype, {rows, cols}, {s0, s1}, offset * element_size(dtype));
    validate_tensor(t);
    return t;
}

} // namespace

TEST_CASE("a row-major product maps to cuBLASLt as the column-major product of the transposes", "[cuda][matmul]") {
    // A[3,4] (ld 4), B[4,5] (ld 7), C[3,5] (ld 6), all row-major: Cᵀ[5,3] = Bᵀ[5,4] · Aᵀ[4,3], no op.
    const auto plan = plan_lt_matmul(matrix(3, 4, 4, 1), matrix(4, 5, 7, 1), matrix(3, 5, 6, 1));
    REQUIRE(plan);
    CHECK(plan->output_transposed);
    CHECK((plan->m == 5 && plan->n == 3 && plan->k == 4));
    CHECK((plan->first.tensor == 1 && !plan->first.transpose && plan->first.rows == 5 && plan->first.cols == 4 &&
           plan->first.ld == 7));
    CHECK((plan->second.tensor == 0 && !plan->second.transpose && plan->second.rows == 4 && plan->second.cols == 3 &&
           plan->second.ld == 4));
    CHECK(plan->ldd == 6);
}

TEST_CASE("column-major operands and outputs map with op T or without a swap", "[cuda][matmul]") {
    // A column-major (ld 3), B row-major, C row-major: Cᵀ = Bᵀ · Aᵀ with Aᵀ = op T of A as stored.
    const auto row_c = plan_lt_matmul(matrix(3, 4, 1, 3), matrix(4, 5, 5, 1), matrix(3, 5, 5, 1));
    REQUIRE(row_c);
    CHECK((row_c->second.tensor == 0 && row_c->second.transpose && row_c->second.rows == 3 && row_c->second.cols == 4 &&
           row_c->second.ld == 3));
    // C column-major (ld 4): C = A · B, A row-major is op T of Aᵀ as stored, B column-major as stored.
    const auto col_c = plan_lt_matmul(matrix(3, 4, 4, 1), matrix(4, 5, 1, 4), matrix(3, 5, 1, 4));
    REQUIRE(col_c);
    CHECK_FALSE(col_c->output_transposed);
    CHECK((col_c->m == 3 && col_c->n == 5 && col_c->k == 4 && col_c->ldd == 4));
    CHECK((col_c->first.tensor == 0 && col_c->first.transpose && col_c->first.rows == 4 && col_c->first.ld == 4));
    CHECK((col_c->second.tensor == 1 && !col_c->second.transpose && col_c->second.rows == 4 && col_c->second.ld == 4));
}

TEST_CASE("dimensions of size 1 fit either layout whatever their stride", "[cuda][matmul]") {
    // A[3,1] with a column stride of 9, B[1,5], C[1..]: a vector's unused stride does not matter.
    CHECK(plan_lt_matmul(matrix(3, 1, 2, 9), matrix(1, 5, 100, 1), matrix(3, 5, 5, 1)));
    // C[1,5] with inner stride 3 is a column-major 1x5 with ld 3.
    const auto plan = plan_lt_matmul(matrix(1, 4, 4, 1), matrix(4, 5, 5, 1), matrix(1, 5, 1, 3));
    REQUIRE(plan);
    CHECK_FALSE(plan->output_transposed);
    CHECK(plan->ldd == 3);
}

TEST_CASE("views that fit no cuBLASLt layout have no plan", "[cuda][matmul]") {
    CHECK_FALSE(plan_lt_matmul(matrix(3, 4, 8, 2), matrix(4, 5, 5, 1), matrix(3, 5, 5, 1)));  // A inner stride 2
    CHECK_FALSE(plan_lt_matmul(matrix(3, 4, 4, 1), matrix(4, 5, 15, 3), matrix(3, 5, 5, 1))); // B inner stride 3
    CHECK_FALSE(plan_lt_matmul(matrix(3, 4, 4, 1), matrix(4, 5, 5, 1), matrix(3, 5, 10, 2))); // C inner stride 2
    CHECK_FALSE(plan_lt_matmul(matrix(3, 4, 2, 1), matrix(4, 5, 5, 1), matrix(3, 5, 5, 1)));  // A's rows overlap
}

TEST_CASE("the alignment of an operand is that of its address and its leading dimension, at most 256",
          "[cuda][matmul]") {
    CHECK(lt_alignment(0x10000, 1024, 8, 4) == 256);
    CHECK(lt_alignment(0x10004, 1024, 8, 4) == 4);
    CHECK(lt_alignment(0x10000, 1001, 8, 4) == 4);   // ld * 4 bytes = 4004
    CHECK(lt_alignment(0x10000, 1001, 1, 4) == 256); // one column: ld unused
    CHECK(lt_alignment(0x10010, 64, 2, 2) == 16);
}

TEST_CASE("the algorithm cache's key tells apart what changes cuBLASLt's choice, and nothing else", "[cuda][matmul]") {
    const Tensor a = matrix(64, 32, 32, 1);
    const Tensor b = matrix(32, 48, 48, 1);
    const Tensor c = matrix(64, 48, 48, 1);
    const LtPlan plan = *plan_lt_matmul(a, b, c);
    const LtKey base = lt_key(plan, DataType::FLOAT32, false, 0x100000, 0x200000, 0x300000);
    // Other addresses of the same alignment: the same key, so the same algorithm and the same bits.
    const LtKey moved = lt_key(plan, DataType::FLOAT32, false, 0x700000, 0x900100, 0x123400);
    CHECK(base == moved);
    CHECK(LtKeyHash{}(base) == LtKeyHash{}(moved));
    std::unordered_set<std::size_t> hashes{LtKeyHash{}(base)};
    const std::vector<LtKey> others{
        lt_key(plan, DataType::FLOAT32, true, 0x100000, 0x200000, 0x300000),
        lt_key(plan, DataType::BFLOAT16, false, 0x100000, 0x200000, 0x300000),
        lt_key(plan, DataType::FLOAT32, false, 0x100004, 0x200000, 0x300000),
        lt_key(plan, DataType::FLOAT32, false, 0x100000, 0x200008, 0x300000),
        lt_key(plan, DataType::FLOAT32, false, 0x100000, 0x200000, 0x300010),
        lt_key(*plan_lt_matmul(a, matrix(32, 48, 1, 32), c), DataType::FLOAT32, false, 0x100000, 0x200000, 0x300000),
        lt_key(*plan_lt_matmul(a, b, matrix(64, 48, 50, 1)), DataType::FLOAT32, false, 0x100000, 0x200000, 0x300000),
        lt_key(*plan_lt_matmul(matrix(64, 33, 33, 1), matrix(33, 48, 48, 1), c), DataType::FLOAT32, false, 0x100000,
               0x200000, 0x300000),
    };
    for (const LtKey& other : others) {
        CHECK_FALSE(other == base);
        hashes.insert(LtKeyHash{}(other));
    }
    CHECK(hashes.size() == others.size() + 1);
}

TEST_CASE("cuBLASLt that cannot be loaded is an error naming every library tried", "[cuda][matmul]") {
    try {
        (void)cuda::BlasLt::load({"/nonexistent/libcublasLt.so.13", "libcanopy-no-such-library.so.1"});
        FAIL("loaded a library that does not exist");
    } catch (const cuda::CudaError& e) {
        const std::string what = e.what();
        CHECK(what.find("cannot load cuBLASLt") != std::string::npos);
        CHECK(what.find("/nonexistent/libcublasLt.so.13: ") != std::string::npos);
        CHECK(what.find("; libcanopy-no-such-library.so.1: ") != std::string::npos);
        CHECK(e.result() == cuda::DRIVER_NOT_LOADED);
    }
    const char* old = std::getenv("CANOPY_CUBLASLT");
    const std::optional<std::string> saved = old != nullptr ? std::optional<std::string>(old) : std::nullopt;
    ::setenv("CANOPY_CUBLASLT", "/opt/lib/libcublasLt.so.12", 1);
    CHECK(cuda::BlasLt::candidates() == std::vector<std::string>{"/opt/lib/libcublasLt.so.12"});
    ::unsetenv("CANOPY_CUBLASLT");
    CHECK(cuda::BlasLt::candidates() == std::vector<std::string>{"libcublasLt.so.13", "libcublasLt.so.12"});
    if (saved) {
        ::setenv("CANOPY_CUBLASLT", saved->c_str(), 1);
    }
}

TEST_CASE("the toolkit's cuBLASLt loads with every entry point and names its statuses", "[cuda][matmul]") {
    std::optional<cuda::BlasLt> lt;
    try {
        lt.emplace(cuda::BlasLt::load());
    } catch (const cuda::CudaError& e) {
        CANOPY_SKIP("no cuBLASLt on this machine: " << e.what());
    }
    CHECK(lt->version() / 10000 >= cuda::BlasLt::MIN_MAJOR_VERSION);
    CHECK(lt->status_name(static_cast<cuda::BlasStatus>(cuda::BLAS_STATUS_NOT_SUPPORTED)) ==
          "CUBLAS_STATUS_NOT_SUPPORTED");
    try {
        lt->check(static_cast<cuda::BlasStatus>(cuda::BLAS_STATUS_NOT_SUPPORTED), "cublasLtMatmul");
        FAIL("a failed status passed");
    } catch (const cuda::CudaError& e) {
        CHECK(std::string(e.what()).rfind("cublasLtMatmul: CUBLAS_STATUS_NOT_SUPPORTED (", 0) == 0);
        CHECK(e.result() == cuda::BLAS_ERROR);
    }
}

namespace {

// Random floats in [-4, 4] as the bytes of `dtype` (float32 or float64).
std::vector<std::byte> random_matrix(std::mt19937_64& rng, std::size_t count, DataType dtype) {
    std::uniform_real_distribution<double> unit(-4.0, 4.0);
    std::vector<std::byte> bytes(count * element_size(dtype));
    for (std::size_t i = 0; i < count; ++i) {
        const double v = unit(rng);
        if (dtype == DataType::FLOAT64) {
            std::memcpy(&bytes[8 * i], &v, 8);
        } else {
            const auto f = static_cast<float>(v);
            std::memcpy(&bytes[4 * i], &f, 4);
        }
    }
    return bytes;
}

double as_double(const std::byte* p, DataType dtype) {
    if (dtype == DataType::FLOAT64) {
        double v;
        std::memcpy(&v, p, 8);
        return v;
    }
    float f;
    std::memcpy(&f, p, 4);
    return f;
}

// One row-major product C = A·B of `dtype` in device memory, with its host copies and the CPU's result.
struct Product {
    static constexpr std::uint32_t M = 192, K = 320, N = 160;
    DataType dtype;
    std::vector<std::byte> a, b, expected;
    cuda::DeviceAllocation da, db, dc;
    Tensor ta, tb, tc;

    Product(const cuda::Driver& d, std::mt19937_64& rng, DataType type)
        : dtype(type), a(random_matrix(rng, std::size_t{M} * K + 1, type)),
          b(random_matrix(rng, std::size_t{K} * N, type)), expected(std::size_t{M} * N * element_size(type)),
          da(d, a.size()), db(d, b.size()), dc(d, expected.size()), ta(matrix(M, K, K, 1, type)),
          tb(matrix(K, N, N, 1, type)), tc(matrix(M, N, N, 1, type)) {
        da.copy_from_host(a.data(), a.size());
        db.copy_from_host(b.data(), b.size());
        const std::vector<kernels::BoundTensor> cpu{{&ta, TensorTag::INPUT, a.data()},
                                                    {&tb, TensorTag::INPUT, b.data()},
                                                    {&tc, TensorTag::OUTPUT, expected.data()}};
        kernels::run_builtin(kernels::WorkerKind::CHIP, {"matmul", cpu, {}, nullptr}, false);
    }

    // Runs it through `lt` (A shifted by `a_shift` elements when given) and returns C.
    std::vector<std::byte> run(LtMatmul& lt, const cuda::Stream& stream, std::uint32_t flags = 0,
                               std::uint64_t a_shift = 0) {
        Tensor shifted = ta;
        shifted.byte_offset = a_shift * element_size(dtype);
        const std::vector<kernels::BoundTensor> bound{
            {&shifted, TensorTag::INPUT, nullptr}, {&tb, TensorTag::INPUT, nullptr}, {&tc, TensorTag::OUTPUT, nullptr}};
        const std::vector<std::uint64_t> bases{da.get(), db.get(), dc.get()};
        REQUIRE(lt.launch({"matmul", bound, {}, nullptr, flags}, bases, stream.get()));
        stream.synchronize();
        std::vector<std::byte> out(expected.size());
        dc.copy_to_host(out.data(), out.size());
        return out;
    }

    // Every element of `got` within docs/kernels.md's bound of the CPU's.
    void check(const std::vector<std::byte>& got, bool tf32) const {
        const std::size_t size = element_size(dtype);
        for (std::uint32_t m = 0; m < M; ++m) {
            for (std::uint32_t n = 0; n < N; ++n) {
                double sum_abs = 0.0;
                for (std::uint32_t k = 0; k < K; ++k) {
                    sum_abs +=
                        std::fabs(as_double(&a[(m * K + k) * size], dtype) * as_double(&b[(k * N + n) * size], dtype));
                }
                const std::size_t at = (std::size_t{m} * N + n) * size;
                const double x = as_double(&got[at], dtype);
                const double y = as_double(&expected[at], dtype);
                INFO("C[" << m << "," << n << "]: " << x << " vs the CPU's " << y);
                REQUIRE(std::fabs(x - y) <= kernels::matmul_bound(dtype, K, tf32, sum_abs, x, y));
            }
        }
    }
};

} // namespace

TEST_CASE("LtMatmul chooses one algorithm per key, and the same product gives the same bits", "[cuda][gpu][matmul]") {
    REQUIRE_GPU(g);
    const cuda::Driver& d = *g->driver;
    const cuda::Stream stream(d);
    LtMatmul lt(d, "test");
    std::mt19937_64 rng(99);
    for (DataType dtype : {DataType::FLOAT32, DataType::FLOAT64}) {
        INFO(to_string(dtype));
        Product p(d, rng, dtype);
        const std::uint64_t before = lt.counters().heuristics;
        const auto first = p.run(lt, stream);
        const auto again = p.run(lt, stream);
        CHECK(lt.counters().heuristics == before + 1);
        CHECK(first == again);
        p.check(first, false);
        // A at another alignment is another key, chosen once too.
        (void)p.run(lt, stream, 0, 1);
        (void)p.run(lt, stream, 0, 1);
        CHECK(lt.counters().heuristics == before + 2);
    }
    CHECK(lt.available() == true);
    CHECK(lt.counters().products == 8);
    CHECK(lt.counters().fallbacks == 0);
    // TF32 is another key; its results lie within the TF32 bound.
    Product p(d, rng, DataType::FLOAT32);
    const std::uint64_t before = lt.counters().heuristics;
    p.check(p.run(lt, stream, BUILTIN_LAUNCH_TF32), true);
    CHECK(lt.counters().heuristics == before + 1);
}

TEST_CASE("LtMatmul without a loadable cuBLASLt hands every product back to canopy's kernel", "[cuda][gpu][matmul]") {
    REQUIRE_GPU(g);
    const cuda::Driver& d = *g->driver;
    const cuda::Stream stream(d);
    LtMatmul lt(d, "test", {"/nonexistent/libcublasLt.so.13"});
    std::mt19937_64 rng(1);
    Product p(d, rng, DataType::FLOAT32);
    const std::vector<kernels::BoundTensor> bound{
        {&p.ta, TensorTag::INPUT, nullptr}, {&p.tb, TensorTag::INPUT, nullptr}, {&p.tc, TensorTag::OUTPUT, nullptr}};
    const std::vector<std::uint64_t> bases{p.da.get(), p.db.get(), p.dc.get()};
    CHECK_FALSE(lt.launch({"matmul", bound, {}, nullptr}, bases, stream.get()));
    CHECK_FALSE(lt.launch({"matmul", bound, {}, nullptr}, bases, stream.get()));
    CHECK(lt.available() == false);
    CHECK(lt.counters().fallbacks == 2);
    CHECK(lt.counters().products == 0);
}
