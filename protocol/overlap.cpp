#include "protocol/overlap.h"

#include "protocol/detail/saturating.h"

#include <algorithm>

namespace canopy {
namespace {

__extension__ typedef unsigned __int128 u128;

// Half-open byte interval; `unbounded` when the end offset saturated (the true end is past 2^64 - 1).
struct ByteRange {
    std::uint64_t begin;
    std::uint64_t end;
    bool unbounded;
};

ByteRange byte_range(const Tensor& t) noexcept {
    const std::uint64_t extent = tensor_extent_bytes(t);
    const std::uint64_t end = detail::sat_add(t.byte_offset, extent);
    return {t.byte_offset, end, extent == UINT64_MAX || end == UINT64_MAX};
}

bool ranges_disjoint(const ByteRange& a, const ByteRange& b) noexcept {
    return (!a.unbounded && a.end <= b.begin) || (!b.unbounded && b.end <= a.begin);
}

bool range_contains(const ByteRange& outer, const ByteRange& inner) noexcept {
    return outer.begin <= inner.begin && (outer.unbounded || (!inner.unbounded && inner.end <= outer.end));
}

// Per-axis box of a view on a row-major lattice: coordinate interval [lo, lo + n) on each axis.
struct Box {
    std::uint32_t dims;
    u128 lo[MAX_DIMS];
    u128 hi[MAX_DIMS];
};

bool same_lattice(const Tensor& a, const Tensor& b) noexcept {
    if (a.dtype != b.dtype || a.ndims != b.ndims || a.ndims < 1 || a.ndims > MAX_DIMS) {
        return false;
    }
    const std::uint32_t d = a.ndims;
    if (a.strides[d - 1] != 1) {
        return false;
    }
    for (std::uint32_t i = 0; i < d; ++i) {
        if (a.strides[i] != b.strides[i] || a.strides[i] == 0) {
            return false;
        }
        if (i + 1 < d && (a.strides[i + 1] == 0 || a.strides[i] % a.strides[i + 1] != 0)) {
            return false;
        }
    }
    return true;
}

// Decomposes the view's element offset in the mixed radix of its strides. Fails when an axis other
// than the outermost runs past its row, where coordinates would stop being unique.
bool lattice_box(const Tensor& t, Box& box) noexcept {
    const std::uint32_t elem = element_size(t.dtype);
    if (elem == 0 || t.byte_offset % elem != 0) {
        return false;
    }
    std::uint64_t rest = t.byte_offset / elem;
    box.dims = t.ndims;
    for (std::uint32_t i = t.ndims; i-- > 1;) {
        const std::uint64_t radix = t.strides[i - 1] / t.strides[i];
        const std::uint64_t coord = rest % radix;
        rest /= radix;
        if (coord + t.shapes[i] > radix) {
            return false;
        }
        box.lo[i] = coord;
        box.hi[i] = u128{coord} + t.shapes[i];
    }
    box.lo[0] = rest;
    box.hi[0] = u128{rest} + t.shapes[0];
    return true;
}

Overlap compare_boxes(const Box& a, const Box& b) noexcept {
    bool a_in_b = true;
    bool b_in_a = true;
    for (std::uint32_t i = 0; i < a.dims; ++i) {
        if (a.hi[i] <= b.lo[i] || b.hi[i] <= a.lo[i]) {
            return Overlap::NONE;
        }
        a_in_b = a_in_b && b.lo[i] <= a.lo[i] && a.hi[i] <= b.hi[i];
        b_in_a = b_in_a && a.lo[i] <= b.lo[i] && b.hi[i] <= a.hi[i];
    }
    return (a_in_b || b_in_a) ? Overlap::COVERED : Overlap::PARTIAL;
}

} // namespace

Overlap tensor_overlap(const Tensor& a, const Tensor& b) noexcept {
    if (!(a.buffer.identity == b.buffer.identity)) {
        return Overlap::NONE;
    }
    const ByteRange ra = byte_range(a);
    const ByteRange rb = byte_range(b);
    if (ranges_disjoint(ra, rb)) {
        return Overlap::NONE;
    }
    if (ra.unbounded || rb.unbounded) {
        return Overlap::PARTIAL;
    }
    if (tensor_is_contiguous(a) && tensor_is_contiguous(b)) {
        return (range_contains(ra, rb) || range_contains(rb, ra)) ? Overlap::COVERED : Overlap::PARTIAL;
    }
    Box box_a;
    Box box_b;
    if (same_lattice(a, b) && lattice_box(a, box_a) && lattice_box(b, box_b)) {
        return compare_boxes(box_a, box_b);
    }
    return Overlap::PARTIAL;
}

bool tensors_overlap(const Tensor& a, const Tensor& b) noexcept {
    return tensor_overlap(a, b) != Overlap::NONE;
}

const char* to_string(Overlap o) noexcept {
    switch (o) {
    case Overlap::NONE:
        return "none";
    case Overlap::PARTIAL:
        return "partial";
    case Overlap::COVERED:
        return "covered";
    }
    return "unknown";
}

} // namespace canopy
