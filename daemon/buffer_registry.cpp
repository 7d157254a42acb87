#include "daemon/buffer_registry.h"

#include "ipc/child_message.h"
#include "ipc/sys_error.h"
#include "worker/import_registry.h"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <sys/mman.h>
#include <unistd.h>

namespace canopy::daemon {
namespace {

// Buffer ids stay below 2^32 so derived shm names fit in 31 bytes.
constexpr std::uint32_t MAX_SLOTS = 1u << 20;

void check_size(std::uint64_t nbytes) {
    if (nbytes > MAX_BUFFER_BYTES) {
        throw BufferCreateError("buffer create: " + std::to_string(nbytes) + " bytes is over the limit of " +
                                std::to_string(MAX_BUFFER_BYTES) + " bytes (2^48) per buffer");
    }
}

// The message of a failed system call during a creation; running out of file descriptors says so.
std::string system_failure(int err, const std::string& call) {
    if (err == EMFILE || err == ENFILE) {
        return "no file descriptor left in canopyd (" + call + ")";
    }
    return call;
}

// Reserves the pages of [0, nbytes) of `fd`: 0, or the error posix_fallocate returned (it reports the error
// as its result, not in errno).
int reserve(int fd, std::uint64_t nbytes) {
    int err;
    do {
        err = ::posix_fallocate(fd, 0, static_cast<off_t>(nbytes));
    } while (err == EINTR);
    return err;
}

} // namespace

BufferRegistry::BufferRegistry(std::filesystem::path journal_dir, Unlink unlink)
    : unlink_(unlink), journal_(std::move(journal_dir)), owner_(draw_owner_instance()) {}

BufferRegistry::~BufferRegistry() {
    release_all();
}

CanonicalIdentity BufferRegistry::mint_locked() {
    std::uint32_t index;
    if (!free_slots_.empty()) {
        index = free_slots_.back();
        free_slots_.pop_back();
    } else {
        if (slots_.size() >= MAX_SLOTS) {
            throw std::length_error("buffer table is full (" + std::to_string(MAX_SLOTS) + " buffers)");
        }
        index = static_cast<std::uint32_t>(slots_.size());
        slots_.emplace_back();
    }
    Slot& slot = slots_[index];
    CanonicalIdentity id{};
    id.owner_instance = owner_;
    id.buffer_id = index + 1ULL;
    id.generation = slot.generation + 1;
    return id;
}

BufferDescriptor BufferRegistry::create_posix_shm(std::uint64_t nbytes, Access access, const std::string& creator) {
    check_size(nbytes);
    CanonicalIdentity id{};
    BufferDescriptor d;
    std::string name;
    {
        std::lock_guard lock(mu_);
        id = mint_locked(); // the slot is taken out of free_slots_: nobody else mints this identity meanwhile
        name = worker::posix_shm_name_for(id);
        try {
            d = make_posix_shm_descriptor(id, nbytes, access, name);
        } catch (...) {
            free_slots_.push_back(static_cast<std::uint32_t>(id.buffer_id - 1));
            throw;
        }
    }
    try {
        make_shm_object(name, nbytes); // outside mu_: reserving a large object takes a while
    } catch (...) {
        std::lock_guard lock(mu_);
        free_slots_.push_back(static_cast<std::uint32_t>(id.buffer_id - 1));
        throw;
    }
    std::lock_guard lock(mu_);
    Slot& slot = slots_[id.buffer_id - 1];
    slot.generation = id.generation;
    slot.live = true;
    slot.info = {d, creator, {}, {}};
    return d;
}

void BufferRegistry::make_shm_object(const std::string& name, std::uint64_t nbytes) {
    const std::string path = "/" + name;
    auto fail = [&](bool created, const std::string& message) {
        if (created) {
            unlink_shm(name);
        }
        journal_.erase(name);
        throw BufferCreateError("buffer create: " + message);
    };
    try {
        journal_.record(name);
    } catch (const ipc::SysError& e) {
        fail(false, system_failure(e.err(), e.what()));
    }
    const int fd = ::shm_open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd < 0) {
        const int err = errno;
        fail(false, system_failure(err, "shm_open(" + path + "): " + std::strerror(err)));
    }
    const ipc::UniqueFd owner(fd);
    if (::ftruncate(fd, static_cast<off_t>(nbytes)) != 0) {
        const int err = errno;
        fail(true,
             system_failure(err, "ftruncate(" + path + ", " + std::to_string(nbytes) + "): " + std::strerror(err)));
    }
    if (const int err = reserve(fd, nbytes); err != 0) {
        fail(true, err == ENOSPC ? "/dev/shm has no room for " + std::to_string(nbytes) +
                                       " bytes (posix_fallocate: " + std::strerror(err) + ")"
                                 : "cannot reserve " + std::to_string(nbytes) +
                                       " bytes in /dev/shm (posix_fallocate: " + std::strerror(err) + ")");
    }
}

BufferDescriptor BufferRegistry::begin_vmm(Backend backend, std::uint64_t nbytes, Access access, std::uint32_t device,
                                           std::vector<std::string> world, const std::string& creator) {
    check_size(nbytes);
    std::lock_guard lock(mu_);
    const CanonicalIdentity id = mint_locked();
    try {
        const BufferDescriptor d = make_vmm_descriptor(backend, id, nbytes, access, device);
        Slot& slot = slots_[id.buffer_id - 1];
        slot.generation = id.generation;
        slot.pending = true;
        slot.fds.clear();
        slot.fds.resize(std::max<std::size_t>(world.size(), 1));
        slot.info = {d, creator, std::move(world), {}};
        return d;
    } catch (...) {
        free_slots_.push_back(static_cast<std::uint32_t>(id.buffer_id - 1));
        throw;
    }
}

bool BufferRegistry::offer_fd(const BufferDescriptor& d, const std::string& from, std::uint16_t rank,
                              ipc::UniqueFd fd) {
    std::lock_guard lock(mu_);
    const CanonicalIdentity& id = d.identity;
    if (id.owner_instance != owner_ || id.buffer_id == 0 || id.buffer_id > slots_.size() || !fd) {
        return false;
    }
    Slot& slot = slots_[id.buffer_id - 1];
    if (!slot.pending || slot.generation != id.generation || !(slot.info.descriptor == d)) {
        return false;
    }
    const bool symmetric = !slot.info.world.empty();
    if (symmetric != (rank != ipc::NOT_SYMMETRIC) || (symmetric && rank >= slot.info.world.size())) {
        return false;
    }
    const std::size_t index = symmetric ? rank : 0;
    const std::string& expected = symmetric ? slot.info.world[index] : slot.info.creator;
    const bool from_expected = expected == from || expected.rfind(from + "/", 0) == 0;
    if (!from_expected || slot.fds[index]) {
        return false;
    }
    slot.fds[index] = std::move(fd);
    fds_cv_.notify_all();
    return true;
}

bool BufferRegistry::wait_fds(const CanonicalIdentity& id, std::chrono::milliseconds timeout) {
    std::unique_lock lock(mu_);
    return fds_cv_.wait_for(lock, timeout, [&] {
        const Slot& slot = slots_[id.buffer_id - 1];
        return std::all_of(slot.fds.begin(), slot.fds.end(), [](const ipc::UniqueFd& fd) { return bool(fd); });
    });
}

void BufferRegistry::commit_vmm(const CanonicalIdentity& id) {
    std::lock_guard lock(mu_);
    Slot& slot = slots_[id.buffer_id - 1];
    slot.pending = false;
    slot.live = true;
}

void BufferRegistry::abort_vmm(const CanonicalIdentity& id) {
    std::lock_guard lock(mu_);
    Slot& slot = slots_[id.buffer_id - 1];
    if (!slot.pending || slot.generation != id.generation) {
        return;
    }
    slot.pending = false;
    slot.fds.clear();
    free_slots_.push_back(static_cast<std::uint32_t>(id.buffer_id - 1));
}

BufferDescriptor BufferRegistry::register_arena(const std::string& name, Backend backend, std::uintptr_t base,
                                                std::size_t length) {
    std::lock_guard lock(mu_);
    const CanonicalIdentity id = mint_locked();
    const Access access = backend == Backend::FORK_COW ? Access::READ : Access::READWRITE;
    const BufferDescriptor d = make_fork_descriptor(backend, id, length, access, base);
    Slot& slot = slots_[id.buffer_id - 1];
    slot.generation = id.generation;
    slot.live = true;
    slot.info = {d, "/", {}, name};
    return d;
}

std::optional<BufferInfo> BufferRegistry::find_arena(const std::string& name) const {
    std::lock_guard lock(mu_);
    for (const Slot& slot : slots_) {
        if (slot.live && !slot.info.name.empty() && slot.info.name == name) {
            return slot.info;
        }
    }
    return std::nullopt;
}

bool BufferRegistry::begin_release(const CanonicalIdentity& id) {
    std::lock_guard lock(mu_);
    if (id.owner_instance != owner_) {
        const auto it = remote_.find(key_of(id));
        if (it == remote_.end() || !it->second.live || it->second.releasing) {
            return false;
        }
        it->second.releasing = true;
        return true;
    }
    if (lookup_locked(id) != BufferLookup::LIVE) {
        return false;
    }
    Slot& slot = slots_[id.buffer_id - 1];
    if (!slot.info.name.empty()) {
        throw std::invalid_argument("buffer " + to_string(id) + " is the preloaded arena '" + slot.info.name +
                                    "', which lives as long as the daemon");
    }
    if (slot.releasing) {
        return false;
    }
    slot.releasing = true;
    return true;
}

bool BufferRegistry::releasing(const CanonicalIdentity& id) const {
    std::lock_guard lock(mu_);
    if (id.owner_instance != owner_) {
        const auto it = remote_.find(key_of(id));
        return it != remote_.end() && it->second.live && it->second.releasing;
    }
    return lookup_locked(id) == BufferLookup::LIVE && slots_[id.buffer_id - 1].releasing;
}

std::optional<std::string> BufferRegistry::release(const CanonicalIdentity& id) {
    std::lock_guard lock(mu_);
    if (lookup_locked(id) != BufferLookup::LIVE) {
        throw std::out_of_range("buffer " + to_string(id) + " is not live");
    }
    Slot& slot = slots_[id.buffer_id - 1];
    if (!slot.info.name.empty()) {
        throw std::invalid_argument("buffer " + to_string(id) + " is the preloaded arena '" + slot.info.name +
                                    "', which lives as long as the daemon");
    }
    std::optional<std::string> failure;
    if (Backend{slot.info.descriptor.backend} == Backend::POSIX_SHM) {
        const std::string name(shm_name(slot.info.descriptor));
        const int err = unlink_(name);
        if (err == 0 || err == ENOENT) {
            journal_.erase(name);
        } else {
            failure = "shm_unlink(/" + name + "): " + std::strerror(err) + "; kept in the journal for the next start";
        }
    }
    slot.fds.clear();
    slot.live = false;
    slot.releasing = false;
    free_slots_.push_back(static_cast<std::uint32_t>(id.buffer_id - 1));
    return failure;
}

std::vector<std::string> BufferRegistry::release_all() {
    std::vector<CanonicalIdentity> live;
    {
        std::lock_guard lock(mu_);
        for (const Slot& slot : slots_) {
            if (slot.live) {
                live.push_back(slot.info.descriptor.identity);
            }
        }
    }
    std::vector<std::string> failures;
    for (const auto& id : live) {
        if (!find(id)->name.empty()) {
            continue; // preloaded arenas are unmapped with the process, not released
        }
        if (auto failure = release(id)) {
            failures.push_back(*failure);
        }
    }
    return failures;
}

BufferLookup BufferRegistry::lookup_locked(const CanonicalIdentity& id) const {
    if (id.owner_instance != owner_ || id.buffer_id == 0 || id.buffer_id > slots_.size()) {
        return BufferLookup::UNKNOWN;
    }
    const Slot& slot = slots_[id.buffer_id - 1];
    if (slot.live && slot.generation == id.generation) {
        return BufferLookup::LIVE;
    }
    if (slot.pending && slot.generation == id.generation) {
        return BufferLookup::UNKNOWN; // not created yet
    }
    return id.generation <= slot.generation ? BufferLookup::STALE : BufferLookup::UNKNOWN;
}

BufferLookup BufferRegistry::inspect_locked(const CanonicalIdentity& id, const BufferInfo*& info,
                                            bool releasing_is_stale) const {
    info = nullptr;
    if (id.owner_instance != owner_) {
        const auto it = remote_.find(key_of(id));
        if (it == remote_.end()) {
            return BufferLookup::UNKNOWN;
        }
        if (!it->second.live || (releasing_is_stale && it->second.releasing)) {
            return BufferLookup::STALE;
        }
        info = &it->second.info;
        return BufferLookup::LIVE;
    }
    const BufferLookup state = lookup_locked(id);
    if (state == BufferLookup::LIVE) {
        const Slot& slot = slots_[id.buffer_id - 1];
        if (releasing_is_stale && slot.releasing) {
            return BufferLookup::STALE;
        }
        info = &slot.info;
    }
    return state;
}

BufferLookup BufferRegistry::lookup(const CanonicalIdentity& id) const {
    std::lock_guard lock(mu_);
    const BufferInfo* info = nullptr;
    return inspect_locked(id, info, true);
}

std::optional<BufferInfo> BufferRegistry::find(const CanonicalIdentity& id) const {
    std::lock_guard lock(mu_);
    const BufferInfo* info = nullptr;
    inspect_locked(id, info, false);
    return info != nullptr ? std::optional<BufferInfo>(*info) : std::nullopt;
}

std::vector<BufferInfo> BufferRegistry::list() const {
    std::lock_guard lock(mu_);
    std::vector<BufferInfo> out;
    for (const Slot& slot : slots_) {
        if (slot.live && !slot.releasing) {
            out.push_back(slot.info);
        }
    }
    for (const auto& [key, remote] : remote_) {
        if (remote.live && !remote.releasing) {
            out.push_back(remote.info);
        }
    }
    return out;
}

BufferRegistry::IdentityKey BufferRegistry::key_of(const CanonicalIdentity& id) noexcept {
    IdentityKey key{};
    std::memcpy(key.data(), &id, sizeof id);
    return key;
}

void BufferRegistry::add_remote(const BufferDescriptor& d, const std::string& host, std::vector<std::string> world) {
    std::lock_guard lock(mu_);
    Remote& entry = remote_[key_of(d.identity)];
    entry.info = BufferInfo{d, host, std::move(world), {}};
    entry.live = true;
    entry.releasing = false;
    entry.why.clear();
}

std::size_t BufferRegistry::lose_remote(const std::string& host, const std::string& why) {
    std::lock_guard lock(mu_);
    std::size_t lost = 0;
    for (auto& [key, remote] : remote_) {
        if (remote.live && remote.info.creator == host) {
            remote.live = false;
            remote.releasing = false;
            remote.why = why;
            ++lost;
        }
    }
    return lost;
}

void BufferRegistry::forget_remote(const CanonicalIdentity& id) {
    std::lock_guard lock(mu_);
    const auto it = remote_.find(key_of(id));
    if (it != remote_.end()) {
        it->second.live = false; // stale from now on, as a released buffer of this supervisor is
        it->second.releasing = false;
        it->second.why.clear();
    }
}

std::optional<std::string> BufferRegistry::remote_host(const CanonicalIdentity& id) const {
    std::lock_guard lock(mu_);
    const auto it = remote_.find(key_of(id));
    return it != remote_.end() && it->second.live ? std::optional<std::string>(it->second.info.creator) : std::nullopt;
}

std::optional<std::string> BufferRegistry::stale_reason(const CanonicalIdentity& id) const {
    std::lock_guard lock(mu_);
    const auto it = remote_.find(key_of(id));
    if (it == remote_.end() || it->second.live || it->second.why.empty()) {
        return std::nullopt;
    }
    return "buffer " + to_string(id) + " lived on remote node " + it->second.info.creator +
           ", whose session ended: " + it->second.why;
}

std::vector<ipc::UniqueFd> BufferRegistry::dup_fds(const CanonicalIdentity& id) const {
    std::lock_guard lock(mu_);
    std::vector<ipc::UniqueFd> out;
    if (lookup_locked(id) != BufferLookup::LIVE) {
        return out;
    }
    for (const auto& fd : slots_[id.buffer_id - 1].fds) {
        out.emplace_back(ipc::sys_check(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0), "fcntl(F_DUPFD_CLOEXEC)"));
    }
    return out;
}

} // namespace canopy::daemon
