#pragma once
// Submit-time checks of one task's tensor arguments (docs/scheduler.md), run by the daemon before it adds
// the task to the Scheduler. Both are pure and need no scheduler state.
//
// They throw canopy::WireError, whose field() names the argument ("args[1]") and whose what() is
// "args[1]: PROBLEM", the same shape as the other validation gates, so the daemon turns every submit
// rejection into {code, message} in one place.
//
// Thread safety: pure functions.

#include "protocol/task_args.h"

#include <span>

namespace canopy::scheduler {

// Requested access must be granted by the buffer (tensor.buffer.access): INPUT needs READ, OUTPUT needs
// WRITE, INOUT needs both. Throws WireError(ACCESS_DENIED) for the first argument that asks for more, e.g.
// "args[1]: output needs write access; the buffer grants read". An argument whose tag is not a TensorTag
// throws WireError(INVALID_TENSOR) with field "args[i].tag".
void check_access(std::span<const TensorArg> args);

// No two tensor arguments of one task may share a byte (same identity, tensor_overlap != NONE) where
// either writes. Throws WireError(OVERLAPPING_WRITES) for the first such pair (i < j) in the order
// (j, i), with field "args[j]", e.g. "args[2]: output overlaps args[0] (input) of the same buffer (partial)".
void check_no_overlapping_writes(std::span<const TensorArg> args);

} // namespace canopy::scheduler
