#pragma once
// Moving bytes between a file and a buffer. Where the daemon hands out a file descriptor that maps here
// (`buffer.fd`: posix_shm and sim_vmm buffers) the bytes go straight between the file and the mapping, with one
// request; otherwise (cuda_vmm buffers, preloaded arenas) as `buffer.write` and `buffer.read` requests of at
// most CHUNK_BYTES raw bytes each (base64 makes that about 683 KiB of frame), at increasing offsets.
//
// Thread safety: uses the caller's Client; one thread at a time.

#include "cli/client.h"

#include <cstdint>
#include <iosfwd>
#include <string>

namespace canopy::cli {

inline constexpr std::size_t CHUNK_BYTES = 512 * 1024;

struct TransferResult {
    std::uint64_t bytes = 0;
    std::size_t requests = 0;
};

// Writes everything `in` holds into buffer `id` from `offset`. An empty stream still sends one write of
// no bytes, so a bad ID or offset is reported. Throws what Client::call throws, and protocol_error when
// a reply's "written" differs from the chunk's size.
TransferResult write_buffer(Client& client, const std::string& id, std::istream& in, std::uint64_t offset,
                            std::size_t chunk = CHUNK_BYTES);

// Reads `bytes` bytes of buffer `id` from `offset` into `out`. Throws what Client::call throws, and
// protocol_error when a reply's "data" is not base64 or not of the requested size.
TransferResult read_buffer(Client& client, const std::string& id, std::ostream& out, std::uint64_t offset,
                           std::uint64_t bytes, std::size_t chunk = CHUNK_BYTES);

// nbytes of buffer `id`, from `buffer.show`.
std::uint64_t buffer_size(Client& client, const std::string& id);

} // namespace canopy::cli
