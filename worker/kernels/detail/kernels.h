#pragma once
// Entry points of each built-in kernel, listed in the table of builtin.cpp.
//   check_*  agreement rules past the parameter lists (dtypes, counts, shapes, scalar ranges); touch no memory
//   run_*    the kernel itself. REQUIRES: the call passed check_builtin and every base it uses is valid.
//
// Thread safety: stateless.

#include "worker/kernels/builtin.h"

namespace canopy::kernels::detail {

// elementwise.cpp
void run_fill(const KernelCall& call);
void run_iota(const KernelCall& call);
void check_copy(const KernelCall& call);
void run_copy(const KernelCall& call);
void run_scale(const KernelCall& call);
void check_axpy(const KernelCall& call);
void run_axpy(const KernelCall& call);

// reduce_sum.cpp
void check_reduce_sum(const KernelCall& call);
void run_reduce_sum(const KernelCall& call);

// matmul.cpp
void check_matmul(const KernelCall& call);
void run_matmul(const KernelCall& call);

// peer.cpp
void check_peer_read(const KernelCall& call);
void run_peer_read(const KernelCall& call);
void check_allgather(const KernelCall& call);
void run_allgather(const KernelCall& call);
// KERNEL_FAILED unless every base is non-null and distinct and bases[my_rank] is args[0]'s own base (when that
// is set). REQUIRES: call.peers is set and passed check_builtin.
void check_peer_bases(const KernelCall& call);

// control.cpp
void check_sleep_ms(const KernelCall& call);
void run_sleep_ms(const KernelCall& call);
[[noreturn]] void run_abort(const KernelCall& call);
void run_segfault(const KernelCall& call);

} // namespace canopy::kernels::detail
