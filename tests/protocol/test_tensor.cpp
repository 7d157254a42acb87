// validate_tensor: one test per rejection rule with its exact field and code; the saturating extent; the
// helpers; a randomized comparison of the gate against an independent 128-bit bound check.

#include "tests/protocol/support.h"
#include "tests/sanitizers.h"

#include <random>
#include <string>

using canopy::testing::property_cases;

using namespace canopy;
using canopy::test::raw_tensor;
using canopy::test::shm_descriptor;
using canopy::test::u128;

namespace {

// A valid 2-D float32 view: extent ((3*16 + 7*2) + 1) * 4 = 252 bytes at offset 64 of a 4096-byte buffer.
Tensor valid_view() {
    return raw_tensor(shm_descriptor(4096), DataType::FLOAT32, {4, 8}, {16, 2}, 64);
}

} // namespace

TEST_CASE("a valid strided view passes the gate", "[protocol]") {
    const Tensor t = valid_view();
    CHECK_NOTHROW(validate_tensor(t));
    CHECK(tensor_extent_bytes(t) == 252);
}

TEST_CASE("a zeroed tensor is invalid", "[protocol]") {
    REQUIRE_WIRE_ERROR(validate_tensor(Tensor{}), ErrorCode::INVALID_TENSOR, "buffer.magic");
}

TEST_CASE("validate_tensor names embedded descriptor fields with a buffer prefix", "[protocol]") {
    SECTION("magic") {
        Tensor t = valid_view();
        t.buffer.magic = 0;
        REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "buffer.magic");
    }
    SECTION("backend") {
        Tensor t = valid_view();
        t.buffer.backend = std::uint8_t{9};
        REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "buffer.backend");
    }
    SECTION("access") {
        Tensor t = valid_view();
        t.buffer.access = std::uint8_t{0};
        REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "buffer.access");
    }
    SECTION("nbytes") {
        Tensor t = valid_view();
        t.buffer.nbytes = 0;
        REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "buffer.nbytes");
    }
    SECTION("body") {
        Tensor t = valid_view();
        t.buffer.body[30] = 1;
        REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "buffer.body[30]");
    }
    SECTION("identity") {
        Tensor t = valid_view();
        t.buffer.identity.generation = 0;
        REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "buffer.identity.generation");
    }
}

TEST_CASE("validate_tensor rejects an unknown dtype", "[protocol]") {
    for (const std::uint8_t raw : std::initializer_list<std::uint8_t>{0, 10, 255}) {
        Tensor t = valid_view();
        t.dtype = raw;
        CAPTURE(raw);
        const WireError e = REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "dtype");
        CHECK(e.problem() == "unknown dtype " + std::to_string(raw));
    }
}

TEST_CASE("validate_tensor rejects non-zero reserved bytes", "[protocol]") {
    for (std::size_t i = 0; i < 6; ++i) {
        Tensor t = valid_view();
        t.reserved[i] = 0x10;
        REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "reserved[" + std::to_string(i) + "]");
    }
}

TEST_CASE("validate_tensor rejects ndims 0", "[protocol]") {
    Tensor t = raw_tensor(shm_descriptor(), DataType::FLOAT32, {}, {});
    REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "ndims");
}

TEST_CASE("validate_tensor rejects ndims 9", "[protocol]") {
    Tensor t = raw_tensor(shm_descriptor(), DataType::UINT8, {1, 1, 1, 1, 1, 1, 1, 1}, {1, 1, 1, 1, 1, 1, 1, 1});
    CHECK_NOTHROW(validate_tensor(t));
    t.ndims = 9;
    const WireError e = REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "ndims");
    CHECK(e.problem() == "ndims must be 1..8, got 9");
    t.ndims = 255;
    REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "ndims");
}

TEST_CASE("validate_tensor rejects a shape of zero", "[protocol]") {
    Tensor t = valid_view();
    t.shapes[1] = 0;
    const WireError e = REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "shapes[1]");
    CHECK(e.problem() == "shape must be > 0");
}

TEST_CASE("validate_tensor rejects a stride of zero", "[protocol]") {
    Tensor t = valid_view();
    t.strides[0] = 0;
    const WireError e = REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "strides[0]");
    CHECK(std::string(e.what()) == "strides[0]: stride must be > 0");
}

TEST_CASE("validate_tensor rejects a non-zero shape slot past ndims", "[protocol]") {
    for (std::size_t i = 2; i < MAX_DIMS; ++i) {
        Tensor t = valid_view();
        t.shapes[i] = 1;
        REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "shapes[" + std::to_string(i) + "]");
    }
}

TEST_CASE("validate_tensor rejects a non-zero stride slot past ndims", "[protocol]") {
    for (std::size_t i = 2; i < MAX_DIMS; ++i) {
        Tensor t = valid_view();
        t.strides[i] = 1;
        REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "strides[" + std::to_string(i) + "]");
    }
}

TEST_CASE("validate_tensor rejects a byte offset that is not a multiple of the element size", "[protocol]") {
    for (const std::uint64_t offset : {1ULL, 2ULL, 3ULL, 66ULL}) {
        Tensor t = valid_view();
        t.byte_offset = offset;
        CAPTURE(offset);
        REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "byte_offset");
    }
    Tensor t = raw_tensor(shm_descriptor(), DataType::FLOAT64, {2}, {1}, 4);
    REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "byte_offset");
    t.byte_offset = 8;
    CHECK_NOTHROW(validate_tensor(t));
}

TEST_CASE("validate_tensor rejects a byte offset past the end of the buffer", "[protocol]") {
    Tensor t = raw_tensor(shm_descriptor(4096), DataType::FLOAT32, {1}, {1}, 4100);
    const WireError e = REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "byte_offset");
    CHECK_THAT(e.problem(), Catch::Contains("4100") && Catch::Contains("4096"));
    t.byte_offset = UINT64_MAX - 3;
    REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "byte_offset");
}

TEST_CASE("validate_tensor rejects a view whose extent runs past the end", "[protocol]") {
    Tensor t = raw_tensor(shm_descriptor(4096), DataType::FLOAT32, {1024}, {1}, 0);
    CHECK_NOTHROW(validate_tensor(t));
    t.shapes[0] = 1025;
    REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "extent");
    t.shapes[0] = 1023;
    t.byte_offset = 4;
    CHECK_NOTHROW(validate_tensor(t));
    t.byte_offset = 8;
    REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "extent");
    t.shapes[0] = 1;
    t.byte_offset = 4096; // at the end: one element does not fit
    REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "extent");
}

TEST_CASE("validate_tensor rejects a view whose end wraps past 2^64", "[protocol]") {
    // offset + extent = 2^64: a wrapping addition would give 0 and pass a naive bound check.
    Tensor t = raw_tensor(shm_descriptor(UINT64_MAX), DataType::FLOAT32, {1}, {1}, UINT64_MAX - 3);
    REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "extent");
    t.byte_offset = UINT64_MAX - 7; // ends at 2^64 - 4: fits
    CHECK_NOTHROW(validate_tensor(t));
}

TEST_CASE("validate_tensor refuses an extent that overflows 64 bits by name", "[protocol]") {
    // (2^31 * 2^31 + 1) * 4 = 2^64 + 4.
    const Tensor t = raw_tensor(shm_descriptor(4), DataType::FLOAT32, {2147483649U}, {2147483648U});
    CHECK(tensor_extent_bytes(t) == UINT64_MAX);
    const WireError e = REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "extent");
    CHECK(e.problem() == "view extent overflows 64 bits");
    CHECK_THAT(std::string(e.what()), Catch::Contains("view extent overflows 64 bits"));
}

TEST_CASE("an overflowing extent is refused even over the largest buffer", "[protocol]") {
    Tensor t = raw_tensor(shm_descriptor(UINT64_MAX), DataType::FLOAT32, {2147483649U}, {2147483648U});
    const WireError e = REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "extent");
    CHECK(e.problem() == "view extent overflows 64 bits");
    REQUIRE_WIRE_ERROR(make_tensor(shm_descriptor(4), DataType::FLOAT32, {2147483649U}, {2147483648U}),
                       ErrorCode::INVALID_TENSOR, "extent");
}

TEST_CASE("an extent whose sum of products overflows saturates", "[protocol]") {
    Tensor t = raw_tensor(shm_descriptor(UINT64_MAX), DataType::UINT8, {}, {});
    t.ndims = 8;
    t.shapes.fill(UINT32_MAX);
    t.strides.fill(UINT32_MAX);
    CHECK(tensor_extent_bytes(t) == UINT64_MAX);
    const WireError e = REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "extent");
    CHECK(e.problem() == "view extent overflows 64 bits");
}

TEST_CASE("an extent of exactly 2^64 - 1 bytes reads as overflow", "[protocol]") {
    // ((2^32-2)(2^32-1) + 2(2^32-1) + (2^32-2)) + 1 = 2^64 - 1 elements of one byte. UINT64_MAX is the
    // saturation value, so the gate refuses the view even though nbytes = 2^64 - 1 would hold it.
    const Tensor t = raw_tensor(shm_descriptor(UINT64_MAX), DataType::UINT8, {UINT32_MAX, 3, UINT32_MAX},
                                {UINT32_MAX, UINT32_MAX, 1});
    REQUIRE(test::reference_extent(t) == u128{UINT64_MAX});
    CHECK(tensor_extent_bytes(t) == UINT64_MAX);
    REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "extent");
}

TEST_CASE("the largest representable extent is accepted over a buffer that holds it", "[protocol]") {
    // 2^64 - 2 one-byte elements at offset 1 end exactly at nbytes = 2^64 - 1.
    const Tensor t = raw_tensor(shm_descriptor(UINT64_MAX), DataType::UINT8, {UINT32_MAX, 3, UINT32_MAX - 1},
                                {UINT32_MAX, UINT32_MAX, 1}, 1);
    REQUIRE(test::reference_extent(t) == u128{UINT64_MAX - 1});
    CHECK(tensor_extent_bytes(t) == UINT64_MAX - 1);
    CHECK_NOTHROW(validate_tensor(t));
}

TEST_CASE("tensor_extent_bytes follows the extent formula", "[protocol]") {
    CHECK(tensor_extent_bytes(raw_tensor(shm_descriptor(), DataType::FLOAT64, {1}, {1})) == 8);
    CHECK(tensor_extent_bytes(raw_tensor(shm_descriptor(), DataType::INT16, {5}, {3})) == (4 * 3 + 1) * 2);
    CHECK(tensor_extent_bytes(raw_tensor(shm_descriptor(), DataType::INT8, {2, 3, 4}, {100, 10, 1})) ==
          (100 + 20 + 3 + 1));
    CHECK(tensor_extent_bytes(raw_tensor(shm_descriptor(), DataType::FLOAT32, {3, 3}, {1, 3})) == 9 * 4);
}

TEST_CASE("tensor_extent_bytes is defined for invalid bytes", "[protocol]") {
    Tensor t = raw_tensor(shm_descriptor(), DataType::FLOAT32, {4}, {1});
    t.dtype = std::uint8_t{77};
    CHECK(tensor_extent_bytes(t) == 0);

    Tensor wide = raw_tensor(shm_descriptor(), DataType::INT8, {2, 2, 2, 2, 2, 2, 2, 2}, {1, 1, 1, 1, 1, 1, 1, 1});
    const std::uint64_t eight = tensor_extent_bytes(wide);
    CHECK(eight == 9);
    wide.ndims = 200;
    CHECK(tensor_extent_bytes(wide) == eight);
}

TEST_CASE("tensor_element_count multiplies the shapes and saturates", "[protocol]") {
    CHECK(tensor_element_count(raw_tensor(shm_descriptor(), DataType::FLOAT32, {3, 4, 5}, {20, 5, 1})) == 60);
    CHECK(tensor_element_count(raw_tensor(shm_descriptor(), DataType::FLOAT32, {}, {})) == 0);
    Tensor big = raw_tensor(shm_descriptor(), DataType::FLOAT32, {}, {});
    big.ndims = 3;
    big.shapes = {UINT32_MAX, UINT32_MAX, UINT32_MAX};
    CHECK(tensor_element_count(big) == UINT64_MAX);
}

TEST_CASE("tensor_is_contiguous recognises dense row-major views only", "[protocol]") {
    const BufferDescriptor d = shm_descriptor();
    CHECK(tensor_is_contiguous(raw_tensor(d, DataType::FLOAT32, {7}, {1})));
    CHECK(tensor_is_contiguous(raw_tensor(d, DataType::FLOAT32, {4, 8}, {8, 1})));
    CHECK(tensor_is_contiguous(raw_tensor(d, DataType::FLOAT32, {2, 3, 4}, {12, 4, 1}, 16)));
    CHECK_FALSE(tensor_is_contiguous(raw_tensor(d, DataType::FLOAT32, {7}, {2})));
    CHECK_FALSE(tensor_is_contiguous(raw_tensor(d, DataType::FLOAT32, {4, 8}, {16, 1})));
    CHECK_FALSE(tensor_is_contiguous(raw_tensor(d, DataType::FLOAT32, {4, 8}, {1, 4})));
    CHECK_FALSE(tensor_is_contiguous(raw_tensor(d, DataType::FLOAT32, {}, {})));
}

TEST_CASE("make_tensor fills row-major strides", "[protocol]") {
    const Tensor t = make_tensor(shm_descriptor(), DataType::FLOAT16, {2, 3, 4}, {}, 2);
    CHECK(t.ndims == 3);
    CHECK(t.dtype == DataType::FLOAT16);
    CHECK(t.byte_offset == 2);
    CHECK(t.shapes == std::array<std::uint32_t, 8>{2, 3, 4, 0, 0, 0, 0, 0});
    CHECK(t.strides == std::array<std::uint32_t, 8>{12, 4, 1, 0, 0, 0, 0, 0});
    CHECK(t.reserved == std::array<std::uint8_t, 6>{});
    CHECK(tensor_is_contiguous(t));
}

TEST_CASE("make_tensor rejects a stride count that does not match the shapes", "[protocol]") {
    REQUIRE_WIRE_ERROR(make_tensor(shm_descriptor(), DataType::FLOAT32, {2, 3}, {1}), ErrorCode::INVALID_TENSOR,
                       "strides");
}

TEST_CASE("make_tensor rejects zero and nine dimensions", "[protocol]") {
    REQUIRE_WIRE_ERROR(make_tensor(shm_descriptor(), DataType::FLOAT32, {}), ErrorCode::INVALID_TENSOR, "ndims");
    REQUIRE_WIRE_ERROR(make_tensor(shm_descriptor(), DataType::INT8, {1, 1, 1, 1, 1, 1, 1, 1, 1}),
                       ErrorCode::INVALID_TENSOR, "ndims");
}

TEST_CASE("make_tensor rejects a row-major stride that does not fit in 32 bits", "[protocol]") {
    REQUIRE_WIRE_ERROR(make_tensor(shm_descriptor(UINT64_MAX), DataType::INT8, {2, 65536, 65536}),
                       ErrorCode::INVALID_TENSOR, "strides[0]");
}

TEST_CASE("make_tensor runs the gate", "[protocol]") {
    REQUIRE_WIRE_ERROR(make_tensor(shm_descriptor(16), DataType::FLOAT32, {5}), ErrorCode::INVALID_TENSOR, "extent");
    REQUIRE_WIRE_ERROR(make_tensor(shm_descriptor(16), DataType::FLOAT32, {2}, {0}), ErrorCode::INVALID_TENSOR,
                       "strides[0]");
}

TEST_CASE("tensors that differ in any single byte compare unequal", "[protocol]") {
    const Tensor base = make_tensor(shm_descriptor(), DataType::FLOAT32, {4, 4}, {8, 1}, 16);
    CHECK(base == make_tensor(shm_descriptor(), DataType::FLOAT32, {4, 4}, {8, 1}, 16));
    for (std::size_t offset = 0; offset < sizeof(Tensor); ++offset) {
        Tensor other = base;
        auto* bytes = reinterpret_cast<unsigned char*>(&other);
        bytes[offset] = static_cast<unsigned char>(bytes[offset] ^ 0x04);
        CAPTURE(offset);
        CHECK_FALSE(base == other);
    }
}

TEST_CASE("validate_tensor agrees with an independent 128-bit bound check", "[protocol]") {
    std::mt19937_64 rng(0x7e5a0c0ffeeULL);
    auto pick = [&](std::uint64_t n) { return std::uniform_int_distribution<std::uint64_t>(0, n - 1)(rng); };
    // Mostly small values, sometimes huge ones near the u32 limit.
    auto dim_value = [&]() -> std::uint32_t {
        switch (pick(4)) {
        case 0:
            return static_cast<std::uint32_t>(UINT32_MAX - pick(4));
        case 1:
            return static_cast<std::uint32_t>(1U + pick(1U << 31));
        default:
            return static_cast<std::uint32_t>(1 + pick(16));
        }
    };
    int accepted = 0;
    int refused = 0;
    const auto iterations = static_cast<int>(property_cases(50000));
    for (int iter = 0; iter < iterations; ++iter) {
        const std::uint64_t nbytes = pick(3) == 0 ? UINT64_MAX - pick(16) : 1 + pick(1 << 16);
        Tensor t = raw_tensor(shm_descriptor(nbytes), static_cast<DataType>(1 + pick(9)), {}, {});
        t.ndims = static_cast<std::uint8_t>(1 + pick(MAX_DIMS));
        for (std::uint32_t i = 0; i < t.ndims; ++i) {
            t.shapes[i] = pick(2) == 0 ? 1 + static_cast<std::uint32_t>(pick(4)) : dim_value();
            t.strides[i] = dim_value();
        }
        const std::uint32_t elem = test::reference_element_size(t.dtype.raw());
        t.byte_offset = pick(2) == 0 ? elem * pick(64) : nbytes - pick(nbytes < 1024 ? nbytes : 1024);

        const u128 extent = test::reference_extent(t);
        const bool aligned = t.byte_offset % elem == 0;
        const bool fits = extent < u128{UINT64_MAX} && u128{t.byte_offset} + extent <= u128{nbytes};
        CAPTURE(iter, nbytes, t.byte_offset, static_cast<int>(t.ndims), elem);
        if (aligned && fits) {
            CHECK(tensor_extent_bytes(t) == static_cast<std::uint64_t>(extent));
            REQUIRE_NOTHROW(validate_tensor(t));
            ++accepted;
        } else {
            REQUIRE_THROWS_AS(validate_tensor(t), WireError);
            ++refused;
        }
    }
    CHECK(accepted > iterations / 50);
    CHECK(refused > iterations / 50);
}

TEST_CASE("the dimension gate names the first bad slot for every ndims", "[protocol]") {
    for (std::uint8_t ndims = 1; ndims <= MAX_DIMS; ++ndims) {
        Tensor base = raw_tensor(shm_descriptor(1 << 20), DataType::UINT8, {}, {});
        base.ndims = ndims;
        for (std::uint32_t i = 0; i < ndims; ++i) {
            base.shapes[i] = 2;
            base.strides[i] = 1;
        }
        REQUIRE_NOTHROW(validate_tensor(base));
        for (std::uint32_t i = 0; i < MAX_DIMS; ++i) {
            const std::string slot = "[" + std::to_string(i) + "]";
            CAPTURE(static_cast<int>(ndims), i);
            Tensor t = base;
            if (i < ndims) {
                t.shapes[i] = 0;
                REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "shapes" + slot);
                t = base;
                t.strides[i] = 0;
                REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "strides" + slot);
                t.shapes[i] = 0; // both zero: the shape is named first
                REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "shapes" + slot);
            } else {
                t.shapes[i] = 0x80000000U;
                REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "shapes" + slot);
                t = base;
                t.strides[i] = 1;
                REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "strides" + slot);
            }
        }
    }
}

TEST_CASE("the dimension gate reports slots in order", "[protocol]") {
    Tensor t = raw_tensor(shm_descriptor(1 << 20), DataType::UINT8, {2, 2, 2}, {4, 2, 1});
    t.shapes[2] = 0;
    t.strides[1] = 0;
    t.shapes[5] = 1;
    REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "strides[1]");
    t.strides[1] = 2;
    REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "shapes[2]");
    t.shapes[2] = 2;
    t.strides[4] = 9;
    REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "strides[4]");
}

TEST_CASE("the first non-zero reserved byte is the one named", "[protocol]") {
    Tensor t = valid_view();
    t.reserved[5] = 1;
    t.reserved[3] = 1;
    REQUIRE_WIRE_ERROR(validate_tensor(t), ErrorCode::INVALID_TENSOR, "reserved[3]");
}
