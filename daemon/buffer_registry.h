#pragma once
// BufferRegistry: the buffers a supervisor owns. It mints identities (owner_instance from getrandom once
// per registry, buffer ids from a slot table, generations bumped on slot reuse), creates and releases
// the backings, and answers whether a descriptor names a live buffer.
//
// POSIX_SHM objects are named posix_shm_name_for(identity) and journaled before creation. SIM_VMM
// buffers are memfds; the registry holds the fd and hands duplicates to consumers, and closes it on
// release.
//
// Thread safety: every public method is safe from any thread (one internal mutex).

#include "daemon/journal.h"
#include "ipc/unique_fd.h"
#include "protocol/descriptor.h"
#include "protocol/tensor.h"

#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

namespace canopy::daemon {

enum class BufferLookup { LIVE, STALE, UNKNOWN };

struct BufferInfo {
    BufferDescriptor descriptor;
    std::string creator;            // worker path that created it ("/" for the supervisor)
    std::vector<std::string> world; // symmetric buffers: the chips of ranks 0..n-1; empty otherwise
    std::string name;               // preloaded arenas: the config's name; empty otherwise
};

class BufferRegistry {
public:
    explicit BufferRegistry(std::filesystem::path journal_dir);
    ~BufferRegistry();

    const std::array<std::uint8_t, 16>& owner_instance() const noexcept { return owner_; }

    // Creates a zero-filled POSIX shm object of nbytes. Throws ipc::SysError.
    BufferDescriptor create_posix_shm(std::uint64_t nbytes, Access access, const std::string& creator);
    // Creates a zero-filled memfd standing in for device memory of `device`.
    BufferDescriptor create_sim_vmm(std::uint64_t nbytes, Access access, std::uint32_t device,
                                    const std::string& creator);

    // Creates a symmetric SIM_VMM buffer: one zero-filled memfd per rank of `world` (chip paths, rank
    // order), one identity. The descriptor names the device of rank 0.
    BufferDescriptor create_symmetric_sim(std::uint64_t nbytes, Access access, std::uint32_t device,
                                          std::vector<std::string> world, const std::string& creator);

    // Registers a preloaded arena (FORK_SHM read-write, FORK_COW read-only) as a live buffer that is
    // never released.
    BufferDescriptor register_arena(const std::string& name, Backend backend, std::uintptr_t base, std::size_t length);

    // Releases a live buffer: unlinks its object (POSIX_SHM) or closes its fd (SIM_VMM), bumps the slot's
    // generation. Returns an error message when the unlink failed (the journal keeps the entry), nullopt
    // on success. Throws std::out_of_range when the identity is not live.
    std::optional<std::string> release(const CanonicalIdentity& id);
    // Releases every live buffer; returns the messages of failed releases.
    std::vector<std::string> release_all();

    BufferLookup lookup(const CanonicalIdentity& id) const;
    std::optional<BufferInfo> find(const CanonicalIdentity& id) const;
    std::optional<BufferInfo> find_arena(const std::string& name) const;
    std::vector<BufferInfo> list() const;
    // Dups of the memfds of a live SIM_VMM buffer (one, or one per rank); empty when none.
    std::vector<ipc::UniqueFd> dup_fds(const CanonicalIdentity& id) const;

    Journal& journal() noexcept { return journal_; }

private:
    struct Slot {
        std::uint32_t generation = 0; // of the live or last released buffer
        bool live = false;
        BufferInfo info{};
        std::vector<ipc::UniqueFd> fds; // SIM_VMM backing: one, or one per rank
    };

    CanonicalIdentity mint_locked();
    BufferDescriptor create_vmm(std::uint64_t nbytes, Access access, std::uint32_t device,
                                std::vector<std::string> world, const std::string& creator);
    BufferLookup lookup_locked(const CanonicalIdentity& id) const;

    mutable std::mutex mu_;
    Journal journal_;
    std::array<std::uint8_t, 16> owner_;
    std::vector<Slot> slots_; // index = buffer_id - 1
    std::vector<std::uint32_t> free_slots_;
};

} // namespace canopy::daemon
