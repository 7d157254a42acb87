#pragma once
// The main loop of a chip or sub worker process: take the next frame from the mailbox, check its
// trailer, decode the TaskArgs blob (the one gate: validate_tensor on every argument), materialize every
// tensor through the import registry, run the kernel, publish the result. A rejected argument fails
// the task with the WireError text and its error code; nothing runs.
//
// Frames whose kernel starts with '@' are control frames from the parent:
//   @release  blob = a CanonicalIdentity; the worker drops its mapping of that buffer.
//   @noop     decodes, validates and materializes its arguments like any task, then runs nothing
//             (the dispatch path alone: liveness checks and benchmarks).
//
// Thread safety: runs on the worker's only thread.

#include "ipc/unique_fd.h"
#include "worker/kernels/builtin.h"

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

namespace canopy::worker {

struct WorkerSpec {
    kernels::WorkerKind kind = kernels::WorkerKind::SUB;
    std::string path;            // "/chip0", for messages
    std::uint32_t generation = 1;
    bool fault_kernels = false;
    // Fork-inherited arenas [base, base + length) this process may resolve FORK_* descriptors into.
    std::vector<std::pair<std::uintptr_t, std::size_t>> arenas;
};

// Serves the mailbox until the parent requests shutdown or closes the control socket; returns the
// process exit code. Sends READY over `control` once the mailbox is mapped.
int run_worker(const WorkerSpec& spec, ipc::UniqueFd mailbox, ipc::UniqueFd control);

// CLOCK_MONOTONIC in nanoseconds.
std::uint64_t monotonic_ns() noexcept;

} // namespace canopy::worker
