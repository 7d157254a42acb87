// tensor_overlap: named cases, saturated end offsets, and a brute-force byte-set oracle over many small
// random views of one buffer.

#include "tests/protocol/support.h"
#include "tests/sanitizers.h"

#include <bitset>
#include <random>

using canopy::testing::property_cases;

using namespace canopy;
using canopy::test::raw_tensor;
using canopy::test::shm_descriptor;

namespace {

// An 8x8 float32 row-major matrix filling a 256-byte buffer.
const BufferDescriptor MATRIX = shm_descriptor(256);

Tensor block(std::uint32_t row, std::uint32_t col, std::uint32_t rows, std::uint32_t cols) {
    return make_tensor(MATRIX, DataType::FLOAT32, {rows, cols}, {8, 1}, (row * 8 + col) * 4);
}

} // namespace

TEST_CASE("disjoint column blocks of a row-major matrix do not overlap", "[protocol]") {
    const Tensor left = block(0, 0, 8, 4);
    const Tensor right = block(0, 4, 8, 4);
    CHECK(tensor_overlap(left, right) == Overlap::NONE);
    CHECK(tensor_overlap(right, left) == Overlap::NONE);
    CHECK_FALSE(tensors_overlap(left, right));
    // Interleaved 2-wide column strips.
    CHECK(tensor_overlap(block(0, 0, 8, 2), block(0, 2, 8, 2)) == Overlap::NONE);
    CHECK(tensor_overlap(block(1, 6, 7, 2), block(0, 0, 8, 6)) == Overlap::NONE);
}

TEST_CASE("disjoint row blocks of a matrix do not overlap", "[protocol]") {
    CHECK(tensor_overlap(block(0, 0, 4, 8), block(4, 0, 4, 8)) == Overlap::NONE);
    CHECK(tensor_overlap(block(0, 0, 3, 3), block(3, 0, 2, 3)) == Overlap::NONE);
}

TEST_CASE("a view and itself are covered", "[protocol]") {
    for (const Tensor& t : {block(0, 0, 8, 8), block(2, 1, 3, 5), block(7, 7, 1, 1)}) {
        CHECK(tensor_overlap(t, t) == Overlap::COVERED);
        CHECK(tensors_overlap(t, t));
    }
    const Tensor row = make_tensor(MATRIX, DataType::FLOAT32, {8}, {1}, 32);
    CHECK(tensor_overlap(row, row) == Overlap::COVERED);
    // A strided column is off the row-major lattice: the analysis may only say it is not disjoint.
    const Tensor column = make_tensor(MATRIX, DataType::FLOAT32, {8}, {8}, 12);
    CHECK(tensor_overlap(column, column) != Overlap::NONE);
}

TEST_CASE("a matrix and its transpose overlap partially", "[protocol]") {
    const Tensor m = make_tensor(MATRIX, DataType::FLOAT32, {8, 8}, {8, 1});
    const Tensor mt = make_tensor(MATRIX, DataType::FLOAT32, {8, 8}, {1, 8});
    CHECK(tensor_overlap(m, mt) == Overlap::PARTIAL);
    CHECK(tensor_overlap(mt, m) == Overlap::PARTIAL);
    const Tensor sub_t = make_tensor(MATRIX, DataType::FLOAT32, {4, 4}, {1, 8}, 4 * 9);
    CHECK(tensor_overlap(block(0, 0, 4, 4), sub_t) == Overlap::PARTIAL);
}

TEST_CASE("a block inside a larger block is covered", "[protocol]") {
    const Tensor outer = block(1, 1, 6, 6);
    const Tensor inner = block(2, 2, 4, 4);
    CHECK(tensor_overlap(outer, inner) == Overlap::COVERED);
    CHECK(tensor_overlap(inner, outer) == Overlap::COVERED);
    CHECK(tensor_overlap(block(0, 0, 8, 8), block(3, 5, 2, 3)) == Overlap::COVERED);
    CHECK(tensor_overlap(block(0, 0, 4, 4), block(2, 2, 4, 4)) == Overlap::PARTIAL);
}

TEST_CASE("contiguous ranges overlap by their byte intervals", "[protocol]") {
    const BufferDescriptor d = shm_descriptor(1024);
    const Tensor a = make_tensor(d, DataType::FLOAT32, {16}, {}, 0);  // [0, 64)
    const Tensor b = make_tensor(d, DataType::FLOAT32, {16}, {}, 32); // [32, 96)
    const Tensor c = make_tensor(d, DataType::FLOAT32, {16}, {}, 64); // [64, 128)
    const Tensor bytes = make_tensor(d, DataType::INT8, {8, 8}, {}, 0);
    const Tensor inner = make_tensor(d, DataType::FLOAT64, {2}, {}, 8);
    CHECK(tensor_overlap(a, b) == Overlap::PARTIAL);
    CHECK(tensor_overlap(a, c) == Overlap::NONE);
    CHECK(tensor_overlap(c, a) == Overlap::NONE);
    CHECK(tensor_overlap(a, bytes) == Overlap::COVERED);
    CHECK(tensor_overlap(inner, a) == Overlap::COVERED);
    CHECK(tensor_overlap(inner, c) == Overlap::NONE);
}

TEST_CASE("views of different identities never overlap", "[protocol]") {
    const Tensor a = make_tensor(shm_descriptor(256, Access::READWRITE, test::identity(1)), DataType::FLOAT32, {64});
    const Tensor b = make_tensor(shm_descriptor(256, Access::READWRITE, test::identity(2)), DataType::FLOAT32, {64});
    CHECK(tensor_overlap(a, b) == Overlap::NONE);
    CHECK_FALSE(tensors_overlap(a, b));

    const Tensor old_generation =
        make_tensor(shm_descriptor(256, Access::READWRITE, test::identity(1, 7, 2)), DataType::FLOAT32, {64});
    CHECK_FALSE(tensors_overlap(a, old_generation));
    const Tensor other_id =
        make_tensor(shm_descriptor(256, Access::READWRITE, test::identity(1, 8, 1)), DataType::FLOAT32, {64});
    CHECK_FALSE(tensors_overlap(a, other_id));
}

TEST_CASE("a view whose end offset saturates overlaps itself", "[protocol]") {
    const BufferDescriptor huge = shm_descriptor(UINT64_MAX);
    SECTION("one byte ending at 2^64 - 1") {
        const Tensor t = make_tensor(huge, DataType::UINT8, {1}, {1}, UINT64_MAX - 1);
        CHECK(tensor_overlap(t, t) != Overlap::NONE);
        CHECK(tensors_overlap(t, t));
    }
    SECTION("a 2^64 - 2 byte view at offset 1") {
        const Tensor t =
            make_tensor(huge, DataType::UINT8, {UINT32_MAX, 3, UINT32_MAX - 1}, {UINT32_MAX, UINT32_MAX, 1}, 1);
        REQUIRE(tensor_extent_bytes(t) == UINT64_MAX - 1);
        CHECK(tensor_overlap(t, t) != Overlap::NONE);
        const Tensor last = make_tensor(huge, DataType::UINT8, {1}, {1}, UINT64_MAX - 1);
        CHECK(tensor_overlap(t, last) != Overlap::NONE);
        CHECK(tensor_overlap(last, t) != Overlap::NONE);
        const Tensor first = make_tensor(huge, DataType::UINT8, {1}, {1}, 0);
        CHECK(tensor_overlap(t, first) == Overlap::NONE);
    }
    SECTION("a contiguous tail ending at 2^64 - 1") {
        const Tensor t = make_tensor(huge, DataType::UINT8, {1024}, {}, UINT64_MAX - 1024);
        CHECK(tensor_overlap(t, t) != Overlap::NONE);
        const Tensor shorter = make_tensor(huge, DataType::UINT8, {16}, {}, UINT64_MAX - 16);
        CHECK(tensor_overlap(t, shorter) != Overlap::NONE);
    }
}

TEST_CASE("an unrepresentable view never compares as disjoint", "[protocol]") {
    // Unvalidated views: the first one's true extent is 2^64 + 4 bytes, so it reaches every offset,
    // including one at 2^64 - 1 where its saturated end offset lies.
    const BufferDescriptor huge = shm_descriptor(UINT64_MAX);
    const Tensor unrepresentable = raw_tensor(huge, DataType::FLOAT32, {2147483649U}, {2147483648U}, 0);
    REQUIRE(tensor_extent_bytes(unrepresentable) == UINT64_MAX);
    const Tensor last_byte = raw_tensor(huge, DataType::UINT8, {1}, {1}, UINT64_MAX);
    CHECK(tensor_overlap(unrepresentable, last_byte) != Overlap::NONE);
    CHECK(tensor_overlap(last_byte, unrepresentable) != Overlap::NONE);
    CHECK(tensor_overlap(unrepresentable, unrepresentable) != Overlap::NONE);
}

TEST_CASE("a view that runs past its row is never reported as disjoint from what it touches", "[protocol]") {
    // Elements 4..9 and 12..17 of the 8-wide matrix: axis 1 runs past the row.
    const Tensor wrapped = make_tensor(MATRIX, DataType::FLOAT32, {2, 6}, {8, 1}, 4 * 4);
    CHECK(tensor_overlap(wrapped, block(1, 0, 1, 2)) != Overlap::NONE); // elements 8, 9
    CHECK(tensor_overlap(block(1, 4, 1, 2), wrapped) != Overlap::NONE); // elements 12, 13
}

TEST_CASE("tensor_overlap does not divide by a zero stride of an unvalidated view", "[protocol]") {
    // strides (4, 0, 1): the lattice test must not compute 4 % 0.
    Tensor t = raw_tensor(MATRIX, DataType::FLOAT32, {2, 2, 2}, {4, 0, 1});
    CHECK(tensor_overlap(t, t) != Overlap::NONE);
}

TEST_CASE("overlap names print", "[protocol]") {
    CHECK(std::string(to_string(Overlap::NONE)) == "none");
    CHECK(std::string(to_string(Overlap::PARTIAL)) == "partial");
    CHECK(std::string(to_string(Overlap::COVERED)) == "covered");
    CHECK(std::string(to_string(static_cast<Overlap>(9))) == "unknown");
}

namespace {

constexpr std::size_t ORACLE_BYTES = 512;
using ByteSet = std::bitset<ORACLE_BYTES>;

struct Rng {
    std::mt19937_64 engine{0x0fe41a9ULL};
    std::uint32_t below(std::uint32_t n) { return std::uniform_int_distribution<std::uint32_t>(0, n - 1)(engine); }
    std::uint32_t between(std::uint32_t lo, std::uint32_t hi) { return lo + below(hi - lo + 1); }
};

ByteSet byte_set(const Tensor& t) {
    const std::uint32_t elem = element_size(t.dtype);
    ByteSet set;
    std::array<std::uint32_t, 3> k{};
    const std::uint32_t n0 = t.shapes[0];
    const std::uint32_t n1 = t.ndims > 1 ? t.shapes[1] : 1;
    const std::uint32_t n2 = t.ndims > 2 ? t.shapes[2] : 1;
    for (k[0] = 0; k[0] < n0; ++k[0]) {
        for (k[1] = 0; k[1] < n1; ++k[1]) {
            for (k[2] = 0; k[2] < n2; ++k[2]) {
                std::uint64_t index = 0;
                for (std::uint32_t i = 0; i < t.ndims; ++i) {
                    index += std::uint64_t{k[i]} * t.strides[i];
                }
                const std::uint64_t first = t.byte_offset + index * elem;
                for (std::uint64_t b = first; b < first + elem; ++b) {
                    set.set(b);
                }
            }
        }
    }
    return set;
}

DataType random_dtype(Rng& rng) {
    return static_cast<DataType>(rng.between(1, 9));
}

// Fills shapes, then an aligned offset that keeps the view inside the buffer. False if it cannot fit.
bool place(Rng& rng, Tensor& t) {
    const std::uint64_t extent = tensor_extent_bytes(t);
    if (extent > ORACLE_BYTES) {
        return false;
    }
    const std::uint32_t elem = element_size(t.dtype);
    const auto slots = static_cast<std::uint32_t>((ORACLE_BYTES - extent) / elem + 1);
    t.byte_offset = std::uint64_t{rng.below(slots)} * elem;
    return true;
}

void random_shapes(Rng& rng, Tensor& t) {
    for (std::uint32_t i = 0; i < t.ndims; ++i) {
        t.shapes[i] = rng.between(1, 4);
    }
}

// Strides 1..8 on each axis, in any order.
void random_strides(Rng& rng, Tensor& t) {
    for (std::uint32_t i = 0; i < t.ndims; ++i) {
        t.strides[i] = rng.between(1, 8);
    }
}

// Row-major lattice strides: innermost 1, each outer one an exact multiple of the next.
void lattice_strides(Rng& rng, Tensor& t) {
    t.strides[t.ndims - 1U] = 1;
    for (std::uint32_t i = t.ndims - 1U; i > 0; --i) {
        t.strides[i - 1] = t.strides[i] * rng.between(1, 6);
    }
}

void row_major_strides(Tensor& t) {
    t.strides[t.ndims - 1U] = 1;
    for (std::uint32_t i = t.ndims - 1U; i > 0; --i) {
        t.strides[i - 1] = t.strides[i] * t.shapes[i];
    }
}

Tensor empty_view(Rng& rng, DataType dtype) {
    Tensor t = raw_tensor(shm_descriptor(ORACLE_BYTES), dtype, {}, {});
    t.ndims = static_cast<std::uint8_t>(rng.between(1, 3));
    return t;
}

// The contract's exact case: same dtype, ndims and lattice strides, and every inner axis of each view
// within one row of the lattice. Computed from the element offset independently of the library.
bool inside_rows(const Tensor& t) {
    const std::uint64_t element = t.byte_offset / element_size(t.dtype);
    for (std::uint32_t i = 1; i < t.ndims; ++i) {
        const std::uint64_t radix = t.strides[i - 1] / t.strides[i];
        const std::uint64_t coord = (element / t.strides[i]) % radix;
        if (coord + t.shapes[i] > radix) {
            return false;
        }
    }
    return true;
}

bool on_one_lattice(const Tensor& a, const Tensor& b) {
    if (a.dtype != b.dtype || a.ndims != b.ndims || a.strides != b.strides || a.strides[a.ndims - 1U] != 1) {
        return false;
    }
    for (std::uint32_t i = 1; i < a.ndims; ++i) {
        if (a.strides[i - 1] % a.strides[i] != 0) {
            return false;
        }
    }
    return inside_rows(a) && inside_rows(b);
}

Overlap truth(const ByteSet& a, const ByteSet& b) {
    if ((a & b).none()) {
        return Overlap::NONE;
    }
    return ((a & ~b).none() || (b & ~a).none()) ? Overlap::COVERED : Overlap::PARTIAL;
}

// A second view on the lattice of `a` whose box lies inside a's box.
Tensor sub_block(Rng& rng, const Tensor& a) {
    Tensor b = a;
    std::uint64_t elements = a.byte_offset / element_size(a.dtype);
    for (std::uint32_t i = 0; i < a.ndims; ++i) {
        b.shapes[i] = rng.between(1, a.shapes[i]);
        const std::uint32_t shift = rng.below(a.shapes[i] - b.shapes[i] + 1);
        elements += std::uint64_t{shift} * a.strides[i];
    }
    b.byte_offset = elements * element_size(a.dtype);
    return b;
}

} // namespace

TEST_CASE("tensor_overlap never answers NONE for views sharing a byte and COVERED only for containment", "[protocol]") {
    Rng rng;
    int pairs = 0;
    int exact_pairs = 0;
    std::array<int, 3> answers{};
    std::array<int, 3> truths{};
    const auto total = static_cast<int>(property_cases(40000));
    while (pairs < total) {
        const int mode = static_cast<int>(rng.below(4));
        Tensor a = empty_view(rng, random_dtype(rng));
        Tensor b = mode == 0 ? empty_view(rng, random_dtype(rng)) : a;
        random_shapes(rng, a);
        random_shapes(rng, b);
        switch (mode) {
        case 0: // unrelated strided views
            random_strides(rng, a);
            random_strides(rng, b);
            break;
        case 1: // one lattice, independent boxes
        case 3: // one lattice, b inside a's box
            lattice_strides(rng, a);
            b.strides = a.strides;
            break;
        default: // two dense row-major views, dtypes may differ
            b.dtype = random_dtype(rng);
            row_major_strides(a);
            row_major_strides(b);
            break;
        }
        if (!place(rng, a) || !place(rng, b)) {
            continue;
        }
        if (mode == 3) {
            b = sub_block(rng, a);
        }
        REQUIRE_NOTHROW(validate_tensor(a));
        REQUIRE_NOTHROW(validate_tensor(b));
        ++pairs;

        const ByteSet sa = byte_set(a);
        const ByteSet sb = byte_set(b);
        const Overlap expected = truth(sa, sb);
        const Overlap got = tensor_overlap(a, b);
        ++answers[static_cast<std::size_t>(got)];
        ++truths[static_cast<std::size_t>(expected)];
        CAPTURE(pairs, mode, to_string(got), to_string(expected), a.byte_offset, b.byte_offset, a.shapes, a.strides,
                b.shapes, b.strides, static_cast<int>(a.dtype.raw()), static_cast<int>(b.dtype.raw()));
        if (got == Overlap::NONE) {
            REQUIRE(expected == Overlap::NONE);
        }
        if (got == Overlap::COVERED) {
            REQUIRE(expected == Overlap::COVERED);
        }
        REQUIRE(tensors_overlap(a, b) == (got != Overlap::NONE));
        const bool exact = (tensor_is_contiguous(a) && tensor_is_contiguous(b)) || on_one_lattice(a, b);
        if (exact) {
            ++exact_pairs;
            REQUIRE(got == expected);
        }
    }
    // The oracle only means something if every answer occurred many times.
    CAPTURE(answers, truths, exact_pairs);
    CHECK(answers[0] > total / 20);
    CHECK(answers[1] > total / 20);
    CHECK(answers[2] > total / 20);
    CHECK(exact_pairs > total / 4);
}
