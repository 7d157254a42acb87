#pragma once
// ImportRegistry: a consumer's map from buffer identity to its local mapping (map-once).
//
// materialize() is called for every tensor argument of every task, after the blob was decoded and
// validated. The first sight of an identity maps the backing; later sights re-check that the incoming
// descriptor equals the one that was mapped, so one identity never comes to mean two backings. A
// descriptor naming an older generation of a slot than one already seen is refused as stale. release()
// drops a mapping when the owner releases the buffer.
//
// POSIX_SHM is opened by its name, which must be the name derived from the identity, and refused when
// the object is smaller than nbytes. SIM_VMM asks the parent for the memfd by identity (FdSource) and maps
// it. CUDA_VMM asks for the fds the same way and hands them to a DeviceMapper (a cuda chip's), which
// imports and maps them into its device's address space; the registry keeps what the mapper returns, so
// map-once, generations and release work alike for every backend.
// FORK_SHM / FORK_COW are refused unless [base, base + nbytes) lies inside an arena this process
// inherited at fork (register_arena), so a forged base can never become an access.
//
// Thread safety: none; the worker's main thread owns it.

#include "ipc/mapped_region.h"
#include "ipc/unique_fd.h"
#include "protocol/descriptor.h"
#include "protocol/error.h"

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace canopy::worker {

// A materialization failure, with the error code the task fails with.
class ImportError : public std::runtime_error {
public:
    ImportError(ErrorCode code, const std::string& message) : std::runtime_error(message), code_(code) {}
    ErrorCode code() const noexcept { return code_; }

private:
    ErrorCode code_;
};

// What the parent hands over for a VMM buffer: one fd, or one per rank of a symmetric buffer with the
// requester's rank.
struct VmmFds {
    VmmFds() = default;
    VmmFds(VmmFds&&) = default;
    VmmFds& operator=(VmmFds&&) = default;

    std::vector<ipc::UniqueFd> fds;
    bool symmetric = false;
    std::uint32_t rank = 0;
};

// Fetches the fds of a VMM buffer from the parent by identity; throws ImportError when it cannot.
using FdSource = std::function<VmmFds(const BufferDescriptor&)>;

// A CUDA_VMM buffer mapped by a DeviceMapper: `owner` keeps the imports and mappings alive (dropped on
// release); bases[r] is the device address of rank r's copy (one entry for a buffer that is not symmetric).
struct DeviceImport {
    std::shared_ptr<void> owner;
    std::vector<std::uint64_t> bases;
};

// Imports the fds of a CUDA_VMM buffer (one per rank, in rank order) for this worker's device; throws
// ImportError (UNREACHABLE_BUFFER where this device cannot access the memory) or a CUDA error.
using DeviceMapper = std::function<DeviceImport(const BufferDescriptor&, const VmmFds&)>;

// The peer table of a symmetric buffer in this process: bases[r] is rank r's copy; bases[rank] is the
// process's own mapping. Every entry is non-null and distinct (checked when built). For a CUDA_VMM buffer
// the entries are device addresses.
struct PeerBases {
    std::vector<std::byte*> bases;
    std::uint32_t rank = 0;
};

// The POSIX shm name (without '/') derived from an identity: "cnpy" + 8 hex digits of the owner
// instance + "-" + hex buffer id + "-" + hex generation. At most 31 bytes for buffer ids below 2^32.
std::string posix_shm_name_for(const CanonicalIdentity& id);

class ImportRegistry {
public:
    explicit ImportRegistry(FdSource fd_source = {}, DeviceMapper device_mapper = {});

    // Address of byte 0 of the buffer: a host address, or for CUDA_VMM the device address. Throws ImportError
    // (STALE_BUFFER, UNKNOWN_BUFFER, INVALID_DESCRIPTOR, UNREACHABLE_BUFFER), or what the DeviceMapper throws.
    std::byte* materialize(const BufferDescriptor& d);

    // Whether this identity is mapped (a later materialize of it only re-checks the descriptor).
    bool contains(const CanonicalIdentity& id) const { return entries_.count(id) != 0; }

    // The peer table of a materialized symmetric buffer; nullptr for any other buffer.
    const PeerBases* peers(const CanonicalIdentity& id) const;

    // Drops the mapping of this identity (and every older generation of its slot); no-op if absent.
    void release(const CanonicalIdentity& id);

    // Declares a fork-inherited arena [base, base + length).
    void register_arena(const void* base, std::size_t length);

    std::size_t size() const noexcept { return entries_.size(); }

private:
    struct Entry {
        BufferDescriptor descriptor;
        ipc::MappedRegion region; // empty for fork arenas
        std::byte* base;
        std::vector<ipc::MappedRegion> peer_regions; // symmetric buffers: every rank's copy
        PeerBases peers;
        std::shared_ptr<void> device_owner; // CUDA_VMM: the DeviceMapper's imports and mappings
    };

    std::byte* map_new(const BufferDescriptor& d);
    std::byte* map_posix_shm(const BufferDescriptor& d, Entry& e);
    std::byte* map_fork(const BufferDescriptor& d);
    std::byte* map_vmm(const BufferDescriptor& d);
    VmmFds fetch_fds(const BufferDescriptor& d);
    static void fill_peers(const BufferDescriptor& d, Entry& e, std::uint32_t rank);
    void check_generation(const BufferDescriptor& d);

    FdSource fd_source_;
    DeviceMapper device_mapper_;
    std::unordered_map<CanonicalIdentity, Entry> entries_;
    std::unordered_map<std::string, std::uint32_t> newest_generation_; // slot key -> newest generation seen
    std::vector<std::pair<std::uintptr_t, std::size_t>> arenas_;
};

} // namespace canopy::worker
