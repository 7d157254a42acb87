#pragma once
// The copies that move the bytes of a buffer this process cannot map (device memory, a remote host's buffer)
// to or from a POSIX_SHM staging buffer it can: `copy` tasks of at most 1 GiB on the worker that reaches the buffer
// (its chip, or the link of its remote node).
//
// Thread safety: any thread; `done` runs once, on a supervisor thread or the calling one.

#include "daemon/supervisor.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>

namespace canopy::daemon {

// The bytes of one `copy` between a buffer and its staging buffer.
inline constexpr std::uint64_t STAGED_COPY_BYTES = std::uint64_t{1} << 30;

// Copies [offset, offset + length) of `buffer` from (`to_buffer`) or to byte 0 of `staging`, on `worker`, each
// copy bounded by `timeout` (0: none). `done` gets the first failure, or the last success. REQUIRES: length > 0,
// the range inside both buffers.
void copy_through(Supervisor& supervisor, const std::string& worker, const BufferDescriptor& buffer,
                  const BufferDescriptor& staging, std::uint64_t offset, std::uint64_t length, bool to_buffer,
                  std::chrono::milliseconds timeout, std::function<void(const TaskResult&)> done);

} // namespace canopy::daemon
