#pragma once
// The daemon's own view of a range of a buffer's bytes, for the transfers of buffer.write and buffer.read: a
// HostWindow maps [offset, offset + length) of a host-reachable buffer into this process (POSIX shm by name, a
// sim_vmm memfd from the registry, a preloaded arena at its fork-inherited address), and byte_range_views names
// the same range as the scheduler sees it.
//
// Ownership: a HostWindow owns its mapping (none for a preloaded arena, which is always mapped) and unmaps it on
// destruction; the pages stay valid while it lives, whatever happens to the buffer meanwhile.
// Thread safety: plain values; map_window may run on any thread.

#include "daemon/buffer_registry.h"
#include "ipc/mapped_region.h"
#include "protocol/task_args.h"

#include <cstdint>
#include <span>
#include <vector>

namespace canopy::daemon {

struct HostWindow {
    ipc::MappedRegion region; // empty for a preloaded arena
    std::byte* data = nullptr;
    std::uint64_t length = 0;

    std::span<std::byte> bytes() const noexcept { return {data, static_cast<std::size_t>(length)}; }
};

// Maps [offset, offset + length) of `info`'s bytes, writable when `write`. REQUIRES: the range lies in the buffer,
// length > 0, and the backend is not CUDA_VMM (device memory is reached through a staging buffer). Throws
// RequestError (ACCESS_DENIED for a write to a FORK_COW arena, UNKNOWN_BUFFER for a memfd gone meanwhile) and
// ipc::SysError.
HostWindow map_window(const BufferInfo& info, const BufferRegistry& registry, std::uint64_t offset,
                      std::uint64_t length, bool write);

// The same for a POSIX_SHM descriptor alone, opened by its name (the remote link maps its L4's buffers so).
HostWindow map_shm_window(const BufferDescriptor& d, std::uint64_t offset, std::uint64_t length, bool write);

// [offset, offset + length) of `buffer` as uint8 views tagged `tag`, each at most 2^32 - 1 bytes (a view's shape
// is 32 bits): what a transfer or a hand-over orders after. REQUIRES: length > 0 and the range lies in the buffer.
std::vector<TensorArg> byte_range_views(const BufferDescriptor& buffer, std::uint64_t offset, std::uint64_t length,
                                        TensorTag tag);

} // namespace canopy::daemon
