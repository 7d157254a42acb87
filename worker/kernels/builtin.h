#pragma once
// The built-in kernels on the CPU: all of them in `sim` chip workers, the element-wise ones in `sub` workers.
// docs/kernels.md states each kernel's signature and exact semantics; a CUDA implementation gives the same
// results.
//
// A worker decodes a TaskArgs blob (every Tensor passed validate_tensor), maps each buffer, and describes the
// call with a KernelCall whose BoundTensors carry the host address of byte 0 of each buffer's mapping. Every
// base maps at least the descriptor's nbytes, so every element of a view lies inside its mapping.
//
// check_builtin reads only the call's views, tags, scalars and the peer table's size: it touches no buffer
// memory, and a caller that knows a symmetric buffer's world but not its addresses (the scheduler at submit)
// may pass a table of null bases. run_builtin checks again, validates the bases, then runs the kernel on the
// calling thread. Both throw KernelError (worker/kernels/kernel_error.h); a call that fails a check writes
// nothing.
//
// Ownership: a KernelCall borrows everything it points to for the duration of the call.
// Thread safety: no shared state. Concurrent calls are independent unless a view one of them writes overlaps a
// view of another (the scheduler orders such tasks).

#include "protocol/task_args.h"
#include "protocol/tensor.h"
#include "worker/kernels/kernel_error.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace canopy::kernels {

// One tensor argument, materialized.
struct BoundTensor {
    const Tensor* view; // validated view
    TensorTag tag;
    std::byte* base; // host address of byte 0 of the buffer's mapping; nullptr only for peer-only use
};

// The bases of every rank's copy of a symmetric buffer, ranks 0..world-1.
struct PeerTable {
    std::span<std::byte* const> bases; // bases[rank] is that rank's copy; bases[my_rank] is the own base
    std::uint32_t my_rank;
};

struct KernelCall {
    std::string_view name;
    std::span<const BoundTensor> tensors;
    std::span<const ScalarArg> scalars;
    const PeerTable* peers = nullptr; // set when tensors[0] is over a symmetric buffer
    // The task's built-in launch flags (protocol/builtin_launch.h). The CPU kernels compute the same values
    // whatever they say: BUILTIN_LAUNCH_TF32 only permits a GPU to use TF32.
    std::uint32_t launch_flags = 0;
};

enum class WorkerKind { CHIP, SUB };

// "chip" or "sub".
const char* to_string(WorkerKind kind) noexcept;

// Checks a call against the kernel's signature without touching buffer memory: the kernel is offered to this
// worker kind (else UNKNOWN_KERNEL naming it and the kinds that offer it, or saying fault kernels are
// disabled), tensor and scalar counts, tags, scalar kinds and ranges, dtype, element-count and shape
// agreement (BAD_REQUEST naming the argument: "copy: args[1] has 12 elements, args[0] has 16"), the launch
// flags (BAD_REQUEST for an undefined bit, or tf32 anywhere but a float32 matmul: "fill: launch.tf32 applies
// to matmul only"), and a constant PE index against the world when `peers` is set (PE_OUT_OF_RANGE).
// REQUIRES: every non-null view passed validate_tensor.
void check_builtin(WorkerKind kind, const KernelCall& call, bool fault_kernels_enabled);

// check_builtin, then the bases (KERNEL_FAILED for a missing mapping or a malformed peer table; BAD_REQUEST
// for a peer kernel without a peer table), then the kernel. The fault kernels do not return.
void run_builtin(WorkerKind kind, const KernelCall& call, bool fault_kernels_enabled);

// The built-ins offered to a worker kind, in a fixed order; the fault kernels only when enabled.
std::vector<std::string_view> builtin_names(WorkerKind kind, bool fault_kernels_enabled);

} // namespace canopy::kernels
