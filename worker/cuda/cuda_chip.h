#pragma once
// The cuda chip worker: the process that serves one GPU's mailbox.
//
// Start-up, in order: refuse to start in a build without the CUDA Toolkit (no kernels embedded); load the
// driver; check that `device` exists; retain that device's primary context (and no other device's); load the
// embedded kernels; send READY. A failure at any step is reported to the parent as FATAL, naming the chip and
// the cause ("cuda chip /chip0: device 3 does not exist (2 GPUs visible)"), and the process exits with
// FATAL_EXIT_CODE; the supervisor marks the chip dead rather than restarting it into the same failure.
//
// Serving: exactly the sim worker's loop (serve_frames: trailer checks, decode_task_args_into as the one gate,
// every tensor materialized before anything runs, @release and @noop). Buffers are POSIX_SHM host buffers made
// visible to the GPU by HostBuffers; other backends fail UNREACHABLE_BUFFER. Each call is checked with
// kernels::check_builtin(WorkerKind::CHIP, ...) first, so it fails with the same codes and messages as on a sim
// chip, then fill, iota, copy, scale, axpy, reduce_sum and matmul run on the GPU (Launcher; matmul through
// cuBLASLt where it can, LtMatmul) on the chip's stream, which the task waits for; sleep_ms, abort and segfault run on
// the CPU as on a sim chip; peer_read and allgather need symmetric buffers, which are not served yet. With fault
// kernels enabled, illegal_address stores through a bad device address.
//
// CUDA failures: a failed driver call fails the task with KERNEL_FAILED, "KERNEL: CALL: CUDA_ERROR_NAME
// (description)". After a sticky error (cuda::is_sticky, or any error the context then keeps returning) the
// context is unusable: the failure is published, then the worker exits with status 1 and the supervisor
// restarts it.
//
// Thread safety: runs on the process's only thread.

#include "ipc/unique_fd.h"
#include "worker/worker_loop.h"

#include <cstdint>

namespace canopy::worker {

// Serves the mailbox of the cuda chip of `device` (a CUDA device ordinal of this process) until shutdown;
// returns the process exit code: 0 at shutdown, 1 after a sticky CUDA error, FATAL_EXIT_CODE when it could not
// start. REQUIRES: this process has not initialized CUDA before (it must be forked before any CUDA use).
int run_cuda_chip(const WorkerSpec& spec, std::uint32_t device, ipc::UniqueFd mailbox, ipc::UniqueFd control);

} // namespace canopy::worker
