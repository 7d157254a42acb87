#pragma once
// BufferRegistry: the buffers a supervisor owns. It mints identities (owner_instance from getrandom once
// per registry, buffer ids from a slot table, generations bumped on slot reuse), creates and releases
// the backings, and answers whether a descriptor names a live buffer.
//
// POSIX_SHM objects are named posix_shm_name_for(identity), journaled before creation, and have their
// pages reserved at creation (posix_fallocate: /dev/shm is a tmpfs, where ftruncate reserves nothing and a
// touch past its space would be SIGBUS in every process that maps the buffer). Device buffers
// (SIM_VMM memfds, CUDA_VMM allocations) are created by the chips of their device: begin_vmm() mints the
// identity and records a pending creation, the chips hand over one fd per rank (offer_fd, accepted only
// from the chip expected for that rank), and commit_vmm() makes the buffer live once every fd is in, or
// abort_vmm() retires the identity. The registry holds the fds, hands duplicates to consumers, and closes
// them on release (the memory goes away once no consumer maps it any more).
//
// No buffer is larger than MAX_BUFFER_BYTES. A creation that fails leaves nothing behind: no object, no
// journal entry, no slot.
//
// Thread safety: every public method is safe from any thread (one internal mutex, not held while a
// POSIX shm object is created).

#include "daemon/journal.h"
#include "ipc/unique_fd.h"
#include "protocol/descriptor.h"
#include "protocol/tensor.h"

#include <array>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <unordered_map>
#include <vector>

namespace canopy::daemon {

enum class BufferLookup { LIVE, STALE, UNKNOWN };

// The largest buffer of any backend: 2^48 bytes (256 TiB), past the memory of any host or device.
inline constexpr std::uint64_t MAX_BUFFER_BYTES = std::uint64_t{1} << 48;

// A buffer the registry could not create: too large, no room in /dev/shm, no file descriptor left. what()
// starts "buffer create: " and names the size or the cause, e.g. "buffer create: /dev/shm has no room for
// 1073741824 bytes (posix_fallocate: No space left on device)". The service answers it BAD_REQUEST.
class BufferCreateError : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

struct BufferInfo {
    BufferDescriptor descriptor;
    std::string creator;            // worker path that created it ("/" for the supervisor)
    std::vector<std::string> world; // symmetric buffers: the chips of ranks 0..n-1; empty otherwise
    std::string name;               // preloaded arenas: the config's name; empty otherwise
};

class BufferRegistry {
public:
    // How a released POSIX_SHM object is unlinked: 0 or the errno. Tests pass one that fails.
    using Unlink = int (*)(const std::string& name) noexcept;

    explicit BufferRegistry(std::filesystem::path journal_dir, Unlink unlink = unlink_shm);
    ~BufferRegistry();

    const std::array<std::uint8_t, 16>& owner_instance() const noexcept { return owner_; }

    // Creates a zero-filled POSIX shm object of nbytes with its pages reserved. Throws BufferCreateError.
    BufferDescriptor create_posix_shm(std::uint64_t nbytes, Access access, const std::string& creator);
    // Mints the identity of a device buffer (SIM_VMM or CUDA_VMM) of `device` and records its creation as
    // pending: one fd is expected from `creator` (a chip path), or for a symmetric buffer one per chip of
    // `world` (rank order; the descriptor names the device of rank 0). The identity is not live until
    // commit_vmm(). Throws BufferCreateError for nbytes over MAX_BUFFER_BYTES.
    BufferDescriptor begin_vmm(Backend backend, std::uint64_t nbytes, Access access, std::uint32_t device,
                               std::vector<std::string> world, const std::string& creator);
    // Takes the fd of rank `rank` (NOT_SYMMETRIC for a plain buffer) of a pending creation from the child
    // `from` (the direct child's path: the chip itself, or the nested node above it). Returns false, and
    // closes the fd, unless `d` is a pending creation, `from` is (or is above) the chip expected for that
    // rank, and that rank's fd is still missing.
    bool offer_fd(const BufferDescriptor& d, const std::string& from, std::uint16_t rank, ipc::UniqueFd fd);
    // Waits until every fd of the pending creation is in; false after `timeout`.
    bool wait_fds(const CanonicalIdentity& id, std::chrono::milliseconds timeout);
    // Makes a pending creation live (REQUIRES every fd in), or retires its identity (later sights are stale).
    void commit_vmm(const CanonicalIdentity& id);
    void abort_vmm(const CanonicalIdentity& id);

    // Registers a preloaded arena (FORK_SHM read-write, FORK_COW read-only) as a live buffer that is
    // never released.
    BufferDescriptor register_arena(const std::string& name, Backend backend, std::uintptr_t base, std::size_t length);

    // Marks a live buffer (this supervisor's, or a remote host's) as on its way out: from then on lookup() and
    // inspect() answer STALE and list() leaves it out, so nothing new names it, while find(), dup_fds() and
    // remote_host() still answer for it, so the tasks already queued over it run, until release() (or
    // forget_remote()) ends it. Returns false, and changes nothing, unless the buffer is live and not releasing.
    // Throws std::invalid_argument for a preloaded arena, which lives as long as the daemon.
    bool begin_release(const CanonicalIdentity& id);
    bool releasing(const CanonicalIdentity& id) const;

    // Releases a live buffer, whether its release has begun or not: unlinks its object (POSIX_SHM) or closes its fd
    // (SIM_VMM), bumps the slot's generation. Returns an error message when the unlink failed (the journal keeps the
    // entry), nullopt on success. Throws std::out_of_range when the identity is not live.
    std::optional<std::string> release(const CanonicalIdentity& id);
    // Releases every live buffer; returns the messages of failed releases.
    std::vector<std::string> release_all();

    // What `id` is to a new use: a releasing buffer is STALE.
    BufferLookup lookup(const CanonicalIdentity& id) const;
    // The entry of a live buffer, releasing ones included (what the tasks queued over it need).
    std::optional<BufferInfo> find(const CanonicalIdentity& id) const;
    // What `id` is, and, when it is live, f(info) called under the registry's lock: one lookup and no copy of the
    // entry, for the checks every task argument passes. A buffer whose release has begun is STALE to a new use and
    // LIVE to a task accepted before (`accepted`), which its release waits for. f must not call into the registry.
    template <class F>
    BufferLookup inspect(const CanonicalIdentity& id, F&& f, bool accepted = false) const {
        std::lock_guard lock(mu_);
        const BufferInfo* info = nullptr;
        const BufferLookup state = inspect_locked(id, info, !accepted);
        if (info != nullptr) {
            f(*info);
        }
        return state;
    }
    std::optional<BufferInfo> find_arena(const std::string& name) const;
    // The live buffers, releasing ones left out.
    std::vector<BufferInfo> list() const;
    // Buffers of remote hosts (docs/multihost.md): POSIX_SHM buffers a node on another host made for this L4,
    // under that node's identities. add_remote registers one as live on `host` (the remote node's path), which
    // lookup, find and list then answer for; lose_remote marks every live one of `host` stale with `why` (the
    // link's session ended, and the node released them) and returns how many; forget_remote marks a released one
    // stale. They are never journaled or unlinked here: their objects live on the other host.
    void add_remote(const BufferDescriptor& d, const std::string& host, std::vector<std::string> world = {});
    std::size_t lose_remote(const std::string& host, const std::string& why);
    void forget_remote(const CanonicalIdentity& id);
    // The host of a live remote buffer; nullopt for any other identity.
    std::optional<std::string> remote_host(const CanonicalIdentity& id) const;
    // Why a remote buffer is stale ("buffer ID lived on remote node /hb, whose session ended: <why>"); nullopt
    // when it is not a remote buffer lost with its host's session.
    std::optional<std::string> stale_reason(const CanonicalIdentity& id) const;

    // Dups of the memfds of a live SIM_VMM buffer (one, or one per rank); empty when none.
    std::vector<ipc::UniqueFd> dup_fds(const CanonicalIdentity& id) const;

    Journal& journal() noexcept { return journal_; }

private:
    struct Slot {
        std::uint32_t generation = 0; // of the live or last released buffer
        bool live = false;
        bool pending = false;   // a device buffer whose chips have not handed over every fd yet
        bool releasing = false; // live, but released once the tasks queued over it have run (begin_release())
        BufferInfo info{};
        std::vector<ipc::UniqueFd> fds; // device buffers: one, or one per rank
    };

    struct Remote {
        BufferInfo info; // creator: the remote node's path
        bool live = true;
        bool releasing = false;
        std::string why; // when lost
    };
    using IdentityKey = std::array<std::uint8_t, sizeof(CanonicalIdentity)>;
    static IdentityKey key_of(const CanonicalIdentity& id) noexcept;

    CanonicalIdentity mint_locked();
    // REQUIRES mu_. What `id` is; `info` points at its entry when it is live. A releasing buffer is LIVE here
    // (its queued tasks still reach it) and, with `releasing_is_stale`, STALE without an entry (nothing new does).
    BufferLookup inspect_locked(const CanonicalIdentity& id, const BufferInfo*& info, bool releasing_is_stale) const;
    // Journals, creates, sizes and reserves the object `name` of nbytes; on failure removes what it made and
    // throws BufferCreateError.
    void make_shm_object(const std::string& name, std::uint64_t nbytes);
    BufferLookup lookup_locked(const CanonicalIdentity& id) const;

    Unlink unlink_;
    mutable std::mutex mu_;
    std::condition_variable fds_cv_; // an fd of a pending creation arrived
    Journal journal_;
    std::array<std::uint8_t, 16> owner_;
    std::vector<Slot> slots_; // index = buffer_id - 1
    std::vector<std::uint32_t> free_slots_;
    std::map<IdentityKey, Remote> remote_; // buffers of remote hosts, live and lost
};

} // namespace canopy::daemon
