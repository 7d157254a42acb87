#pragma once
// Overlap analysis of two views of one backing, used by the scheduler to infer dependencies and to refuse
// overlapping writes within a task.
//
// tensor_overlap answers, for the byte sets A and B of two views:
//   NONE     A and B share no byte (only answered when that is proven)
//   COVERED  one set contains the other (a view and itself, a block inside a larger block)
//   PARTIAL  they may share bytes, and neither is known to contain the other; also the answer for
//            anything the analysis cannot model
// Stage 1 compares bounding byte ranges with saturating end offsets, so an unrepresentable view never
// compares as disjoint. Stage 2 is exact for two dense row-major views, and for two views on one
// row-major lattice (same dtype, ndims and strides, strides exact multiples down to 1) whose every axis
// stays inside its row. Views of different identities are NONE: they name different backings.
//
// Thread safety: pure functions.

#include "protocol/tensor.h"

#include <cstdint>

namespace canopy {

enum class Overlap : std::uint8_t { NONE = 0, PARTIAL = 1, COVERED = 2 };

Overlap tensor_overlap(const Tensor& a, const Tensor& b) noexcept;

// tensor_overlap(a, b) != NONE; false when the identities differ.
bool tensors_overlap(const Tensor& a, const Tensor& b) noexcept;

const char* to_string(Overlap o) noexcept;

} // namespace canopy
