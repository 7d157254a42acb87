// The row-major walk: coalescing of byte layouts and the addresses a cursor yields.
#include "test_kernels_support.h"
#include "worker/kernels/detail/strided.h"

using namespace canopy;
using namespace canopy::kernels;
using namespace canopy::kernels::detail;
using namespace canopy::kernels::test;

namespace {

std::vector<std::ptrdiff_t> offsets_of(FakeBuffer& buf, const Tensor& view) {
    std::vector<std::ptrdiff_t> offsets;
    for_each_element(buf.base(), view, [&](std::byte* p) { offsets.push_back(p - buf.base()); });
    return offsets;
}

} // namespace

TEST_CASE("a dense view becomes one dimension of element-size stride", "[kernels]") {
    FakeBuffer buf(4 * 24);
    const ByteLayout l = byte_layout(make_view(buf, DataType::FLOAT32, {2, 3, 4}, {}, 0));
    CHECK(l.dense());
    CHECK(l.ndims == 1);
    CHECK(l.shapes[0] == 24);
    CHECK(l.strides[0] == 4);
    CHECK(l.count == 24);
}

TEST_CASE("unit dimensions are dropped and a single element is dense", "[kernels]") {
    FakeBuffer buf(64);
    const ByteLayout one = byte_layout(make_view(buf, DataType::INT16, {1, 1, 1}, {7, 5, 3}, 6));
    CHECK(one.dense());
    CHECK(one.count == 1);
    CHECK(one.byte_offset == 6);
    const ByteLayout col = byte_layout(make_view(buf, DataType::INT16, {4, 1}, {3, 1}));
    CHECK(col.ndims == 1);
    CHECK(col.strides[0] == 6);
    CHECK_FALSE(col.dense());
}

TEST_CASE("a column block keeps its row stride and merges nothing across rows", "[kernels]") {
    FakeBuffer buf(4 * 12);
    const Tensor view = make_view(buf, DataType::INT32, {3, 2}, {4, 1}, 8);
    const ByteLayout l = byte_layout(view);
    CHECK(l.ndims == 2);
    CHECK(offsets_of(buf, view) == std::vector<std::ptrdiff_t>{8, 12, 24, 28, 40, 44});
}

TEST_CASE("a transposed view is walked in logical row-major order", "[kernels]") {
    FakeBuffer buf(8 * 6);
    const Tensor view = make_view(buf, DataType::FLOAT64, {2, 3}, {1, 2});
    CHECK(offsets_of(buf, view) == std::vector<std::ptrdiff_t>{0, 16, 32, 8, 24, 40});
}

TEST_CASE("a cursor over three dimensions wraps back to the first element", "[kernels]") {
    FakeBuffer buf(64);
    const Tensor view = make_view(buf, DataType::UINT8, {2, 2, 2}, {20, 6, 2}, 1);
    const std::vector<std::ptrdiff_t> expected{1, 3, 7, 9, 21, 23, 27, 29};
    CHECK(offsets_of(buf, view) == expected);
    ElementCursor cursor(buf.base(), byte_layout(view));
    for (std::size_t i = 0; i < expected.size(); ++i) {
        cursor.next();
    }
    CHECK(cursor.address() - buf.base() == 1);
}

TEST_CASE("paired walks visit equal logical indices of differently shaped views", "[kernels]") {
    FakeBuffer a(16);
    FakeBuffer b(64);
    std::vector<std::pair<std::ptrdiff_t, std::ptrdiff_t>> pairs;
    for_each_element_pair(a.base(), make_view(a, DataType::UINT8, {6}), b.base(),
                          make_view(b, DataType::UINT8, {3, 2}, {10, 3}),
                          [&](std::byte* pa, std::byte* pb) { pairs.emplace_back(pa - a.base(), pb - b.base()); });
    const std::vector<std::pair<std::ptrdiff_t, std::ptrdiff_t>> expected{{0, 0},  {1, 3},  {2, 10},
                                                                          {3, 13}, {4, 20}, {5, 23}};
    CHECK(pairs == expected);
}
