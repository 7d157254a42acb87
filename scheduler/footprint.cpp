#include "scheduler/detail/footprint.h"

#include <algorithm>
#include <cstddef>
#include <cstring>

namespace canopy::scheduler::detail {
namespace {

constexpr std::uint64_t sat_add(std::uint64_t a, std::uint64_t b) noexcept {
    std::uint64_t r = 0;
    return __builtin_add_overflow(a, b, &r) ? UINT64_MAX : r;
}

constexpr std::uint64_t sat_mul(std::uint64_t a, std::uint64_t b) noexcept {
    std::uint64_t r = 0;
    return __builtin_mul_overflow(a, b, &r) ? UINT64_MAX : r;
}

// Bytes spanned by axes 1..ndims-1 of one row: ((sum of (shape - 1) * stride) + 1) * elem, saturated.
std::uint64_t inner_extent(const Tensor& t, std::uint32_t ndims, std::uint32_t elem) noexcept {
    std::uint64_t last = 0;
    for (std::uint32_t i = 1; i < ndims; ++i) {
        last = sat_add(last, sat_mul(t.shapes[i] - 1U, t.strides[i]));
    }
    return sat_mul(sat_add(last, 1), elem);
}

} // namespace

// The view fields (byte_offset through strides, reserved bytes included) are one run of VIEW_BYTES bytes.
constexpr std::size_t VIEW_BYTES = sizeof(Tensor) - offsetof(Tensor, byte_offset);
static_assert(offsetof(Tensor, strides) + sizeof(Tensor::strides) == sizeof(Tensor));

bool same_geometry(const Tensor& a, const Tensor& b) noexcept {
    return std::memcmp(&a.byte_offset, &b.byte_offset, VIEW_BYTES) == 0;
}

bool same_identity(const CanonicalIdentity& a, const CanonicalIdentity& b) noexcept {
    return std::memcmp(&a, &b, sizeof(CanonicalIdentity)) == 0;
}

Overlap overlap_of(const Tensor& a, const Tensor& b) noexcept {
    if (same_geometry(a, b) && same_identity(a.buffer.identity, b.buffer.identity) && element_size(a.dtype) != 0) {
        return Overlap::COVERED;
    }
    return tensor_overlap(a, b);
}

Span byte_span(const Tensor& t) noexcept {
    const std::uint64_t lo = std::min<std::uint64_t>(t.byte_offset, UINT64_MAX - 1);
    const std::uint64_t extent = std::max<std::uint64_t>(tensor_extent_bytes(t), 1);
    return {lo, sat_add(lo, extent)};
}

std::optional<Pitched> pitched_footprint(const Tensor& t) noexcept {
    const std::uint32_t elem = element_size(t.dtype);
    const std::uint32_t ndims = t.ndims;
    if (elem == 0 || ndims < 2 || ndims > MAX_DIMS || t.shapes[0] < 2 || t.strides[0] == 0) {
        return std::nullopt;
    }
    for (std::uint32_t i = 1; i < ndims; ++i) {
        if (t.shapes[i] == 0) {
            return std::nullopt;
        }
    }
    const std::uint64_t pitch = std::uint64_t{t.strides[0]} * elem;
    const std::uint64_t col = t.byte_offset % pitch;
    const std::uint64_t width = inner_extent(t, ndims, elem);
    if (width > pitch - col) {
        return std::nullopt;
    }
    const std::uint64_t row = t.byte_offset / pitch;
    return Pitched{pitch, Rect{{row, sat_add(row, t.shapes[0])}, {col, col + width}}};
}

Rect rect_of_span(Span bytes, std::uint64_t pitch) noexcept {
    const std::uint64_t first = bytes.lo / pitch;
    if (bytes.hi == UINT64_MAX) {
        return {{first, UINT64_MAX}, {0, pitch}};
    }
    const std::uint64_t last = (bytes.hi - 1) / pitch;
    if (first == last) {
        return {{first, first + 1}, {bytes.lo % pitch, (bytes.hi - 1) % pitch + 1}};
    }
    return {{first, last + 1}, {0, pitch}};
}

Footprint footprint_of(const Tensor& t) noexcept {
    return {byte_span(t), pitched_footprint(t)};
}

bool footprints_disjoint(const Footprint& a, const Footprint& b) noexcept {
    const std::optional<Pitched>& pa = a.pitched;
    const std::optional<Pitched>& pb = b.pitched;
    const auto disjoint_in = [&](std::uint64_t pitch) {
        const Rect ra = pa && pa->pitch == pitch ? pa->rect : rect_of_span(a.bytes, pitch);
        const Rect rb = pb && pb->pitch == pitch ? pb->rect : rect_of_span(b.bytes, pitch);
        return !spans_meet(ra.rows, rb.rows) || !spans_meet(ra.cols, rb.cols);
    };
    return (pa && disjoint_in(pa->pitch)) || (pb && !(pa && pa->pitch == pb->pitch) && disjoint_in(pb->pitch));
}

bool covers(const Tensor& cover, Span cover_bytes, const Tensor& inner, Span inner_bytes, Overlap overlap) noexcept {
    if (overlap != Overlap::COVERED || cover_bytes.hi == UINT64_MAX || inner_bytes.hi == UINT64_MAX ||
        !span_contains(cover_bytes, inner_bytes)) {
        return false;
    }
    if (cover_bytes.lo != inner_bytes.lo || cover_bytes.hi != inner_bytes.hi) {
        return true;
    }
    return same_geometry(cover, inner) || tensor_is_contiguous(cover);
}

} // namespace canopy::scheduler::detail
