// Which views the 16-byte vector kernels take and how they cut them (worker/cuda/device_math.h,
// worker/cuda/elementwise_plan.h), compiled by the host compiler: no GPU needed. The kernels themselves are checked
// against the CPU kernels in test_vector_kernels.cpp and test_chip_vector.cpp.
#include "tests/cuda/host_views.h"
#include "worker/cuda/device_math.h"
#include "worker/cuda/device_view.h"
#include "worker/cuda/elementwise_plan.h"

#include <catch2/catch.hpp>
#include <vector>

using namespace canopy;
using namespace canopy::worker;
using namespace canopy::testing;

namespace {

constexpr std::uint64_t BASE = 0x7f0000200000; // a device base: VMM and shm mappings start on a page or more

} // namespace

TEST_CASE("vector_split cuts a contiguous view into a head, whole 16-byte vectors and a tail, each element once",
          "[cuda]") {
    std::vector<std::uint64_t> counts;
    for (std::uint64_t c = 0; c <= 70; ++c) {
        counts.push_back(c);
    }
    for (std::uint64_t c : {std::uint64_t{4096 + 3}, std::uint64_t{(1 << 24) + 5}}) {
        counts.push_back(c);
    }
    for (std::uint64_t size : {1u, 2u, 4u, 8u}) {
        const std::uint64_t per = 16 / size;
        for (std::uint64_t k = 0; k < per; ++k) {
            const std::uint64_t origin = BASE + k * size;
            for (std::uint64_t count : counts) {
                INFO("element size " << size << ", origin " << origin % 16 << " mod 16, " << count << " elements");
                const cuda_math::VectorSplit s = cuda_math::vector_split(origin, count, size);
                const std::uint64_t lead = k == 0 ? 0 : per - k; // elements before the first 16-byte boundary
                CHECK(s.head == std::min(lead, count));
                CHECK(s.tail_start == s.head + s.vectors * per);
                CHECK(s.tail_start <= count);
                CHECK(count - s.tail_start < per);
                if (s.head < count) {
                    CHECK((origin + s.head * size) % 16 == 0);
                }
                if (count >= lead + per) {
                    CHECK(s.vectors == (count - lead) / per);
                } else {
                    CHECK(s.vectors == 0);
                }
            }
        }
    }
}

TEST_CASE("contiguous written views take the vector kernels, whatever their alignment or shape", "[cuda]") {
    const auto d = fake_buffer(std::uint64_t{1} << 30);
    for (DataType dtype : all_dtypes()) {
        INFO(to_string(dtype));
        const std::uint32_t size = static_cast<std::uint32_t>(element_size(dtype));
        for (std::uint64_t offset = 0; offset < 16 / size + 1; ++offset) {
            const auto v = make_device_view(make_tensor(d, dtype, {4099}, {}, offset * size), BASE);
            CHECK(cuda_math::vectorizable(v));
            const ElementwisePlan plan = plan_elementwise(v);
            CHECK(plan.vector);
            CHECK(plan.blocks == (4099 / (16 / size) + cuda_abi::ELEMENTWISE_BLOCK - 1) / cuda_abi::ELEMENTWISE_BLOCK);
        }
        // Dimensions of size 1 with any stride, and dimensions that merge, leave one contiguous dimension.
        CHECK(plan_elementwise(make_device_view(make_tensor(d, dtype, {1, 300}, {301, 1}, size), BASE)).vector);
        CHECK(plan_elementwise(make_device_view(make_tensor(d, dtype, {300, 1}, {1, 3}), BASE)).vector);
        CHECK(plan_elementwise(make_device_view(make_tensor(d, dtype, {4, 8, 16}), BASE)).vector);
        // One element, or none left for a whole vector: one block writes it.
        for (std::uint32_t n : {1u, 7u}) {
            const ElementwisePlan plan = plan_elementwise(make_device_view(make_tensor(d, dtype, {n}, {}, size), BASE));
            CHECK(plan.vector);
            CHECK(plan.blocks == 1);
        }
    }
}

TEST_CASE("strided written views, and origins off the element size, take the strided kernels", "[cuda]") {
    const auto d = fake_buffer(std::uint64_t{1} << 30);
    for (DataType dtype : all_dtypes()) {
        INFO(to_string(dtype));
        const auto strided = make_device_view(make_tensor(d, dtype, {4099}, {2}), BASE);
        CHECK_FALSE(cuda_math::vectorizable(strided));
        const ElementwisePlan plan = plan_elementwise(strided);
        CHECK_FALSE(plan.vector);
        CHECK(plan.blocks == (4099 + cuda_abi::ELEMENTWISE_BLOCK - 1) / cuda_abi::ELEMENTWISE_BLOCK);
        CHECK_FALSE(plan_elementwise(make_device_view(make_tensor(d, dtype, {5, 6, 7}, {64, 8, 1}), BASE)).vector);
        CHECK_FALSE(plan_elementwise(make_device_view(make_tensor(d, dtype, {16, 2}, {4, 1}), BASE)).vector);
        if (element_size(dtype) > 1) {
            // A base that is not a multiple of the element size never reaches a kernel (buffers start on a page);
            // the vector kernels would misplace their 16-byte boundaries over it.
            CHECK_FALSE(plan_elementwise(make_device_view(make_tensor(d, dtype, {4099}), BASE + 1)).vector);
        }
    }
}

TEST_CASE("element-wise grids: the vector kernels stop at one wave of the H200, the strided ones at 8192 blocks",
          "[cuda]") {
    const auto d = fake_buffer(std::uint64_t{1} << 32);
    const auto big = make_device_view(make_tensor(d, DataType::FLOAT32, {1u << 26}), BASE);
    CHECK(plan_elementwise(big).blocks == cuda_abi::ELEMENTWISE_VECTOR_GRID);
    const auto big_strided = make_device_view(make_tensor(d, DataType::FLOAT32, {1u << 24}, {3}), BASE);
    CHECK(plan_elementwise(big_strided).blocks == cuda_abi::ELEMENTWISE_GRID);
    // 2^18 float32 vectors: one block per 256 of them, below the cap.
    const auto mid = make_device_view(make_tensor(d, DataType::FLOAT32, {1u << 20}), BASE);
    CHECK(plan_elementwise(mid).blocks == 1024);
}

TEST_CASE("copy and axpy read their input in the written view's vectors only where the two splits coincide", "[cuda]") {
    const auto d = fake_buffer(std::uint64_t{1} << 20);
    for (DataType dtype : all_dtypes()) {
        INFO(to_string(dtype));
        const std::uint64_t size = element_size(dtype);
        const auto out = make_device_view(make_tensor(d, dtype, {4099}, {}, size), BASE);
        // The same origin modulo 16, whatever the buffers: vectors pair.
        CHECK(cuda_math::vectors_pair(out, make_device_view(make_tensor(d, dtype, {4099}, {}, size), BASE + 4096)));
        CHECK(cuda_math::vectors_pair(out, make_device_view(make_tensor(d, dtype, {4099}, {}, 17 * size), BASE)));
        // Another origin modulo 16, or a strided input: element by element.
        if (size < 16) {
            CHECK_FALSE(
                cuda_math::vectors_pair(out, make_device_view(make_tensor(d, dtype, {4099}, {}, 2 * size), BASE)));
        }
        CHECK_FALSE(cuda_math::vectors_pair(out, make_device_view(make_tensor(d, dtype, {4099}, {2}, size), BASE)));
    }
}
