#pragma once
// The cuda chip worker: the process that serves one GPU's mailbox.
//
// Start-up, in order: refuse to start in a build without the CUDA Toolkit (no kernels embedded); load the
// driver; check that `device` exists; retain that device's primary context (and no other device's); load the
// embedded kernels; send READY. A failure at any step is reported to the parent as FATAL, naming the chip and
// the cause ("cuda chip /chip0: device 3 does not exist (2 GPUs visible)"), and the process exits with
// FATAL_EXIT_CODE; the supervisor marks the chip dead rather than restarting it into the same failure.
//
// Serving: the frame loop every worker shares (serve_frames: trailer checks, the order of frames that run after
// others, decode_task_args_into as the one gate, every tensor materialized before anything runs, @release and
// @noop), with asynchronous launches. Buffers are POSIX_SHM host buffers made visible to the GPU and CUDA_VMM
// device buffers (ChipBuffers). Each call is checked with kernels::check_builtin(WorkerKind::CHIP, ...) first, so
// it fails with the same codes and messages as on a sim chip, then fill, iota, copy, scale, axpy, reduce_sum and
// matmul (cuBLASLt where it can, LtMatmul), user module kernels and illegal_address are launched on the chip's
// stream and handed to its LaunchQueue, which reports each once an event after it has completed: the chip
// takes the next frame while the GPU works, up to the mailbox's 64 frames in flight, and never synchronizes per
// task. sleep_ms, abort and segfault run on the CPU as on a sim chip. peer_read and allgather wait for the tasks
// in flight, then run and synchronize (their device-side PE check is read back before any later task
// launches). @release and @module_unload wait for the tasks in flight before they drop what those may use.
//
// CUDA failures: a failed driver call fails the task with KERNEL_FAILED, "KERNEL: CALL: CUDA_ERROR_NAME
// (description)". After a sticky error (cuda::is_sticky, or any error the context then keeps returning), found
// by a launch or by the LaunchQueue's event, the context is unusable: every task in flight fails with that
// error, the chip takes no further frame, and the worker exits with status 1 so that the supervisor restarts it
// (the frames it had not taken fail WORKER_DIED there).
//
// Thread safety: frames are taken and launched on the process's main thread; the LaunchQueue's thread reports
// completions.

#include "ipc/unique_fd.h"
#include "worker/worker_loop.h"

#include <cstdint>

namespace canopy::worker {

// Serves the mailbox of the cuda chip of `device` (a CUDA device ordinal of this process) until shutdown;
// returns the process exit code: 0 at shutdown, 1 after a sticky CUDA error, FATAL_EXIT_CODE when it could not
// start. REQUIRES: this process has not initialized CUDA before (it must be forked before any CUDA use).
int run_cuda_chip(const WorkerSpec& spec, std::uint32_t device, ipc::UniqueFd mailbox, ipc::UniqueFd control);

} // namespace canopy::worker
