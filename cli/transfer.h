#pragma once
// Moving bytes between a file and a buffer. Where the daemon hands out a file descriptor that maps here
// (`buffer.fd`: posix_shm and sim_vmm buffers) the bytes go straight between the file and the mapping, with one
// request; otherwise (cuda_vmm buffers, preloaded arenas) as `buffer.write` and `buffer.read` requests whose bytes
// travel as attachments, at most CHUNK_BYTES each, at increasing offsets.
//
// Thread safety: uses the caller's Connection; one thread at a time.

#include "client/connection.h"

#include <cstdint>
#include <iosfwd>
#include <string>

namespace canopy::cli {

// The bytes of one buffer.write or buffer.read request of a transfer without a mapping (the file is read into
// memory a request at a time).
inline constexpr std::size_t CHUNK_BYTES = std::size_t{64} << 20;

struct TransferResult {
    std::uint64_t bytes = 0;
    std::size_t requests = 0;
};

// Writes everything `in` holds into buffer `id` from `offset`. An empty stream still sends one write of no bytes,
// so a bad ID or offset is reported. Throws what the Connection throws, and CliError(BAD_REQUEST) for bytes past the
// end of a mapped buffer (the daemon's words).
TransferResult write_buffer(client::Connection& connection, const std::string& id, std::istream& in,
                            std::uint64_t offset, std::size_t chunk = CHUNK_BYTES);

// Reads `bytes` bytes of buffer `id` from `offset` into `out`. A range past the end is CliError(BAD_REQUEST) in the
// daemon's words, wherever the bytes come from.
TransferResult read_buffer(client::Connection& connection, const std::string& id, std::ostream& out,
                           std::uint64_t offset, std::uint64_t bytes, std::size_t chunk = CHUNK_BYTES);

} // namespace canopy::cli
