// The arithmetic shared by the CUDA kernels and the host (worker/cuda/device_math.h), compiled here by the host
// compiler and compared with the CPU kernels' own functions; the views handed to kernels; the embedded image;
// the classification of sticky errors. None of this needs a GPU.
#include "cuda/driver.h"
#include "worker/cuda/device_math.h"
#include "worker/cuda/device_view.h"
#include "worker/cuda/fatbin.h"
#include "worker/kernels/detail/strided.h"
#include "worker/kernels/half.h"

#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

using namespace canopy;
using namespace canopy::worker;

namespace {

std::vector<double> interesting_doubles() {
    std::vector<double> v{0.0,
                          -0.0,
                          1.0,
                          -1.0,
                          65504.0,
                          65519.999,
                          65520.0,
                          -65520.0,
                          std::numeric_limits<double>::infinity(),
                          -std::numeric_limits<double>::infinity(),
                          std::numeric_limits<double>::quiet_NaN(),
                          -std::numeric_limits<double>::quiet_NaN(),
                          std::bit_cast<double>(std::uint64_t{0x7FF0000000000001}),
                          std::numeric_limits<double>::denorm_min(),
                          std::numeric_limits<double>::max(),
                          std::numeric_limits<double>::min(),
                          3.3895313892515355e38,
                          3.4028235e38,
                          5.960464477539063e-8,
                          2.9802322387695312e-8,
                          2.98023223876953125e-8 * 1.0000001,
                          1.1754943508222875e-38,
                          9.183549615799121e-41};
    // Every float16 and every bfloat16 value, and the midpoints and near-midpoints between neighbours.
    for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
        const auto h = static_cast<std::uint16_t>(bits);
        const double f16 = static_cast<double>(kernels::float16_to_float(h));
        const double next16 = static_cast<double>(kernels::float16_to_float(static_cast<std::uint16_t>(h + 1)));
        const double bf = static_cast<double>(kernels::bfloat16_to_float(h));
        const double nextbf = static_cast<double>(kernels::bfloat16_to_float(static_cast<std::uint16_t>(h + 1)));
        for (double x : {f16, bf, (f16 + next16) / 2, (bf + nextbf) / 2}) {
            v.push_back(x);
            v.push_back(std::nextafter(x, 0.0));
            v.push_back(std::nextafter(x, std::numeric_limits<double>::infinity()));
        }
    }
    return v;
}

} // namespace

TEST_CASE("device narrowing to float16 and bfloat16 equals the CPU's for edge and random doubles", "[cuda]") {
    std::vector<double> values = interesting_doubles();
    std::mt19937_64 rng(5);
    for (int i = 0; i < 400000; ++i) {
        values.push_back(std::bit_cast<double>(rng()));
        values.push_back(
            std::ldexp(std::uniform_real_distribution<double>(-1, 1)(rng), static_cast<int>(rng() % 300) - 150));
    }
    const auto differs = [](double v) {
        return cuda_math::narrow16<cuda_math::Float16Format>(v) != kernels::double_to_float16(v) ||
               cuda_math::narrow16<cuda_math::BFloat16Format>(v) != kernels::double_to_bfloat16(v);
    };
    const auto first = std::find_if(values.begin(), values.end(), differs);
    INFO("the first that differs: " << std::hexfloat << (first == values.end() ? 0.0 : *first));
    CHECK(first == values.end());
}

TEST_CASE("device widening of float16 and bfloat16 equals the CPU's for every bit pattern", "[cuda]") {
    for (std::uint32_t bits = 0; bits < 0x10000; ++bits) {
        const auto h = static_cast<std::uint16_t>(bits);
        REQUIRE(std::bit_cast<std::uint32_t>(cuda_math::float16_to_float(h)) ==
                std::bit_cast<std::uint32_t>(kernels::float16_to_float(h)));
        REQUIRE(std::bit_cast<std::uint32_t>(cuda_math::bfloat16_to_float(h)) ==
                std::bit_cast<std::uint32_t>(kernels::bfloat16_to_float(h)));
    }
}

namespace {

BufferDescriptor big_buffer() {
    CanonicalIdentity id{};
    id.owner_instance = draw_owner_instance();
    id.buffer_id = 1;
    id.generation = 1;
    return make_posix_shm_descriptor(id, std::uint64_t{1} << 46, Access::READWRITE, "cnpy-test");
}

// The offset of element i of `t` in bytes from its byte_offset, straight from the definition.
std::uint64_t reference_offset(const Tensor& t, std::uint64_t i) {
    std::uint64_t offset = 0;
    for (std::uint32_t d = t.ndims; d-- > 0;) {
        offset += (i % t.shapes[d]) * t.strides[d] * element_size(t.dtype);
        i /= t.shapes[d];
    }
    return offset;
}

} // namespace

TEST_CASE("device views address every element where the CPU's walk does", "[cuda]") {
    const auto d = big_buffer();
    std::mt19937_64 rng(17);
    for (int round = 0; round < 2000; ++round) {
        Tensor t{};
        t.buffer = d;
        t.dtype = static_cast<DataType>(1 + rng() % 9);
        t.ndims = static_cast<std::uint8_t>(1 + rng() % 8);
        for (std::uint32_t i = 0; i < t.ndims; ++i) {
            t.shapes[i] = static_cast<std::uint32_t>(rng() % 4 == 0 ? 1 : 1 + rng() % 5);
            t.strides[i] = static_cast<std::uint32_t>(1 + rng() % 40);
        }
        if (rng() % 3 == 0) { // row-major, so that dimensions merge
            std::uint32_t s = 1;
            for (std::uint32_t i = t.ndims; i-- > 0;) {
                t.strides[i] = s;
                s *= t.shapes[i];
            }
        }
        t.byte_offset = (rng() % 100) * element_size(t.dtype);
        validate_tensor(t);
        const auto v = make_device_view(t, 0x10000);
        const auto layout = kernels::detail::byte_layout(t);
        REQUIRE(v.count == layout.count);
        REQUIRE(v.ndims == layout.ndims);
        REQUIRE(v.origin == 0x10000 + t.byte_offset);
        constexpr std::uintptr_t BASE = std::uintptr_t{1} << 40; // never dereferenced
        kernels::detail::ElementCursor cursor(reinterpret_cast<std::byte*>(BASE), layout);
        for (std::uint64_t i = 0; i < v.count; ++i, cursor.next()) {
            const std::uint64_t walked = reinterpret_cast<std::uintptr_t>(cursor.address()) - BASE;
            REQUIRE(cuda_math::element_offset(v, i) + t.byte_offset == walked);
            REQUIRE(cuda_math::element_offset(v, i) == reference_offset(t, i));
        }
    }
}

TEST_CASE("device views of more than 2^32 elements address with 64-bit indices", "[cuda]") {
    const auto d = big_buffer();
    Tensor t = make_tensor(d, DataType::INT8, {70000, 3, 70001}, {70001 * 3 * 2, 70001 * 2, 2}, 0);
    const auto v = make_device_view(t, 0);
    REQUIRE(v.count > 0xFFFFFFFFull);
    std::mt19937_64 rng(3);
    for (int i = 0; i < 100000; ++i) {
        const std::uint64_t index = rng() % v.count;
        REQUIRE(cuda_math::element_offset(v, index) == reference_offset(t, index));
    }
    REQUIRE(cuda_math::element_offset(v, v.count - 1) == reference_offset(t, v.count - 1));
}

TEST_CASE("matrix views carry byte strides", "[cuda]") {
    const auto d = big_buffer();
    const Tensor t = make_tensor(d, DataType::FLOAT64, {3, 5}, {1, 3}, 16);
    const auto m = make_matrix_view(t, 1000);
    CHECK(m.origin == 1016);
    CHECK(m.rows == 3);
    CHECK(m.cols == 5);
    CHECK(m.row_stride == 8);
    CHECK(m.col_stride == 24);
}

TEST_CASE("the CUDA kernels are embedded as a fatbin when the toolkit is present", "[cuda]") {
    const auto image = kernel_image();
#if CANOPY_HAVE_CUDA_TOOLKIT
    REQUIRE(image.size() > 1024);
    std::uint32_t magic = 0;
    std::memcpy(&magic, image.data(), sizeof magic);
    CHECK(magic == FATBIN_MAGIC);
    CHECK(reinterpret_cast<std::uintptr_t>(image.data()) % 64 == 0);
#else
    CHECK(image.empty());
#endif
}

TEST_CASE("sticky CUDA errors are the ones that leave the context unusable", "[cuda]") {
    for (int sticky : {700, 702, 709, 710, 714, 715, 716, 717, 718, 719, 214, 220, 999}) {
        INFO(sticky);
        CHECK(cuda::is_sticky(sticky));
    }
    for (int benign : {0, 1, 2, 100, 101, 200, 209, 400, 500, 712, 801, cuda::DRIVER_NOT_LOADED}) {
        INFO(benign);
        CHECK_FALSE(cuda::is_sticky(benign));
    }
}
