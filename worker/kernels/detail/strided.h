#pragma once
// Row-major walks over strided views: the one place where a Tensor's logical indices become byte addresses.
//
// A walk visits every element of a view in row-major logical order (the last dimension fastest) and yields
//   base + byte_offset + (sum over i of index_i * strides_i) * element_size.
// Every offset it forms lies in [byte_offset, byte_offset + extent): for a view that passed validate_tensor and
// a base that maps the buffer's nbytes, every yielded address is an element inside the mapping. Dense views
// take a plain pointer loop.
//
// Thread safety: plain values; a cursor belongs to one thread.

#include "protocol/tensor.h"

#include <array>
#include <cstddef>
#include <cstdint>

namespace canopy::kernels::detail {

// A view in bytes. Dimensions of size 1 are dropped, and a dimension whose stride spans the whole of the next
// one is merged into it; both keep the row-major order. A dense view becomes one dimension whose stride is the
// element size.
struct ByteLayout {
    std::uint32_t ndims = 1; // 1..MAX_DIMS
    std::array<std::uint64_t, MAX_DIMS> shapes{};
    std::array<std::uint64_t, MAX_DIMS> strides{}; // bytes
    std::uint64_t byte_offset = 0;
    std::uint64_t element_size = 0;
    std::uint64_t count = 0; // elements

    bool dense() const noexcept { return ndims == 1 && strides[0] == element_size; }
};

// REQUIRES: view passed validate_tensor.
ByteLayout byte_layout(const Tensor& view) noexcept;

// Iterates a layout in row-major order, one element per next().
class ElementCursor {
public:
    ElementCursor(std::byte* base, const ByteLayout& layout) noexcept
        : base_(base), layout_(layout), offset_(layout.byte_offset) {}

    std::byte* address() const noexcept { return base_ + offset_; }

    // Moves to the next element; after the last one it wraps to the first.
    void next() noexcept {
        for (std::uint32_t d = layout_.ndims; d-- > 0;) {
            if (++index_[d] < layout_.shapes[d]) {
                offset_ += layout_.strides[d];
                return;
            }
            index_[d] = 0;
            offset_ -= (layout_.shapes[d] - 1) * layout_.strides[d];
        }
    }

private:
    std::byte* base_;
    ByteLayout layout_;
    std::uint64_t offset_;
    std::array<std::uint64_t, MAX_DIMS> index_{};
};

// Calls f(std::byte* element) for each element of `view` over `base`, in row-major order.
template <class F>
void for_each_element(std::byte* base, const Tensor& view, F&& f) {
    const ByteLayout layout = byte_layout(view);
    if (layout.dense()) {
        std::byte* p = base + layout.byte_offset;
        for (std::uint64_t i = 0; i < layout.count; ++i, p += layout.element_size) {
            f(p);
        }
        return;
    }
    ElementCursor cursor(base, layout);
    for (std::uint64_t i = 0; i < layout.count; ++i, cursor.next()) {
        f(cursor.address());
    }
}

// Calls f(std::byte* a_element, std::byte* b_element) for the i-th elements of two views, i ascending, both in
// row-major order: a reshape when the shapes differ. REQUIRES: both views have the same element count.
template <class F>
void for_each_element_pair(std::byte* a_base, const Tensor& a, std::byte* b_base, const Tensor& b, F&& f) {
    const ByteLayout la = byte_layout(a);
    const ByteLayout lb = byte_layout(b);
    if (la.dense() && lb.dense()) {
        std::byte* pa = a_base + la.byte_offset;
        std::byte* pb = b_base + lb.byte_offset;
        for (std::uint64_t i = 0; i < la.count; ++i, pa += la.element_size, pb += lb.element_size) {
            f(pa, pb);
        }
        return;
    }
    ElementCursor ca(a_base, la);
    ElementCursor cb(b_base, lb);
    for (std::uint64_t i = 0; i < la.count; ++i, ca.next(), cb.next()) {
        f(ca.address(), cb.address());
    }
}

} // namespace canopy::kernels::detail
