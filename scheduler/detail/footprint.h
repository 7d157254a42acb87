#pragma once
// Footprints: where a view's bytes may lie in its buffer, in the coordinates the access index keys by.
//
// A footprint is a superset of the view's bytes, never a subset; tensor_overlap makes the exact decision
// between the candidates a footprint finds.
//   byte_span          the bounding byte range [byte_offset, byte_offset + extent)
//   pitched_footprint  for a view whose outermost axis steps by whole rows of `pitch` bytes
//                      (pitch = strides[0] * element size) and whose inner axes stay inside one row: the
//                      rectangle of rows [byte_offset / pitch, + shapes[0]) and byte columns
//                      [byte_offset % pitch, + inner extent). Byte b is cell (b / pitch, b % pitch), a
//                      one-to-one map, so two rectangles of one pitch that do not meet hold no common byte.
//   rect_of_span       any byte range as the smallest rectangle of a given pitch that holds it
// and the pairwise decisions built on them: footprints_disjoint (the footprints prove two views share no
// byte), covers (one view's bytes contain another's), overlap_of (tensor_overlap with a fast path for
// views of identical geometry).
// A span's hi of UINT64_MAX means "unbounded": a view whose end offset saturated lies in
// [lo, UINT64_MAX) and meets every span that starts at or after lo.
//
// Thread safety: plain values and pure functions.

#include "protocol/overlap.h"
#include "protocol/tensor.h"

#include <cstdint>
#include <optional>

namespace canopy::scheduler::detail {

// Half-open interval [lo, hi) with lo < hi.
struct Span {
    std::uint64_t lo;
    std::uint64_t hi;
};

constexpr bool spans_meet(Span a, Span b) noexcept {
    return a.lo < b.hi && b.lo < a.hi;
}

constexpr bool span_contains(Span outer, Span inner) noexcept {
    return outer.lo <= inner.lo && inner.hi <= outer.hi;
}

// Cells of a buffer seen as rows of `pitch` bytes.
struct Rect {
    Span rows;
    Span cols;
};

struct Pitched {
    std::uint64_t pitch; // bytes, > 0
    Rect rect;
};

// The bounding byte range; never empty (a view with a zero extent, which validate_tensor refuses, counts as
// one byte).
Span byte_span(const Tensor& t) noexcept;

// The pitch and rectangle of a view with 2..MAX_DIMS axes, shapes[0] >= 2 and inner axes that fit in one
// row; nullopt for every other view.
std::optional<Pitched> pitched_footprint(const Tensor& t) noexcept;

// Both footprints of a view, computed once per access.
struct Footprint {
    Span bytes;
    std::optional<Pitched> pitched;
};
Footprint footprint_of(const Tensor& t) noexcept;

// The smallest rectangle of rows of `pitch` (> 0) bytes holding `bytes`: columns of one row when the span
// lies inside one row, whole rows otherwise.
Rect rect_of_span(Span bytes, std::uint64_t pitch) noexcept;

// Whether two views have the same offset, dtype, axes, shapes and strides (and reserved bytes), hence the
// same bytes of a buffer.
bool same_geometry(const Tensor& a, const Tensor& b) noexcept;

// Byte-wise equality of two identities (the fields hold no padding).
bool same_identity(const CanonicalIdentity& a, const CanonicalIdentity& b) noexcept;

// tensor_overlap(a, b); COVERED at once for two non-empty views of one buffer with the same geometry, the
// common case of a chain of tasks over one view.
Overlap overlap_of(const Tensor& a, const Tensor& b) noexcept;

// Whether the footprints of two views prove that they share no byte: in the pitch of either view that has
// a pitched footprint, its rectangle and the other view's rectangle of that pitch (pitched when the pitches
// agree, else rect_of_span) do not meet. False when neither view has a pitched footprint. Never true for two
// views that share a byte. The access index finds every access for which this is false and tensor_overlap
// is not NONE, whatever groups the accesses fell into.
bool footprints_disjoint(const Footprint& a, const Footprint& b) noexcept;

// Whether every byte of `inner` is proven to be a byte of `cover`, where `overlap` is
// tensor_overlap(cover, inner) and the spans are their byte_spans. COVERED says one byte set contains the
// other, not which one. Bounding ranges are tight (first and last byte of the set), so when range(inner)
// lies inside a different range(cover), inner cannot contain cover and COVERED means cover contains inner.
// When the ranges are equal, the answer is true only for a contiguous `cover` (its bytes are its whole
// range) or two views of identical geometry; false is always a safe answer.
bool covers(const Tensor& cover, Span cover_bytes, const Tensor& inner, Span inner_bytes, Overlap overlap) noexcept;

} // namespace canopy::scheduler::detail
