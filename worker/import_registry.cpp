#include "worker/import_registry.h"

#include "ipc/sys_error.h"

#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>

namespace canopy::worker {
namespace {

std::string slot_key(const CanonicalIdentity& id) {
    std::string key(reinterpret_cast<const char*>(id.owner_instance.data()), id.owner_instance.size());
    key.append(reinterpret_cast<const char*>(&id.buffer_id), sizeof id.buffer_id);
    return key;
}

std::string describe(const BufferDescriptor& d) {
    return std::string(to_string(Backend{d.backend})) + " buffer " + to_string(d.identity);
}

} // namespace

std::string posix_shm_name_for(const CanonicalIdentity& id) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "cnpy%02x%02x%02x%02x-%llx-%x", id.owner_instance[0], id.owner_instance[1],
                  id.owner_instance[2], id.owner_instance[3], static_cast<unsigned long long>(id.buffer_id),
                  id.generation);
    return buf;
}

ImportRegistry::ImportRegistry(FdSource fd_source, DeviceMapper device_mapper)
    : fd_source_(std::move(fd_source)), device_mapper_(std::move(device_mapper)) {}

void ImportRegistry::register_arena(const void* base, std::size_t length) {
    arenas_.emplace_back(reinterpret_cast<std::uintptr_t>(base), length);
}

std::byte* ImportRegistry::materialize(const BufferDescriptor& d) {
    const auto hit = entries_.find(d.identity);
    if (hit != entries_.end()) {
        if (!(hit->second.descriptor == d)) {
            throw ImportError(ErrorCode::INVALID_DESCRIPTOR,
                              describe(d) + " does not match the descriptor it was first mapped with");
        }
        return hit->second.base;
    }
    check_generation(d);
    return map_new(d);
}

void ImportRegistry::check_generation(const BufferDescriptor& d) {
    const auto key = slot_key(d.identity);
    const auto newest = newest_generation_.find(key);
    if (newest != newest_generation_.end() && d.identity.generation < newest->second) {
        throw ImportError(ErrorCode::STALE_BUFFER, describe(d) + " names generation " +
                                                       std::to_string(d.identity.generation) + "; the slot is at " +
                                                       std::to_string(newest->second));
    }
    // A newer generation retires every mapping of the older ones.
    for (auto it = entries_.begin(); it != entries_.end();) {
        it = same_slot(it->first, d.identity) ? entries_.erase(it) : std::next(it);
    }
    newest_generation_[key] = d.identity.generation;
}

std::byte* ImportRegistry::map_new(const BufferDescriptor& d) {
    switch (Backend{d.backend}) {
    case Backend::POSIX_SHM: {
        Entry e{d, {}, nullptr, {}, {}, {}};
        std::byte* base = map_posix_shm(d, e);
        entries_.emplace(d.identity, std::move(e));
        return base;
    }
    case Backend::SIM_VMM:
    case Backend::CUDA_VMM:
        return map_vmm(d);
    case Backend::FORK_SHM:
    case Backend::FORK_COW: {
        std::byte* base = map_fork(d);
        entries_.emplace(d.identity, Entry{d, {}, base, {}, {}, {}});
        return base;
    }
    }
    throw ImportError(ErrorCode::INVALID_DESCRIPTOR, describe(d) + " has an unknown backend");
}

std::byte* ImportRegistry::map_posix_shm(const BufferDescriptor& d, Entry& e) {
    const std::string expected = posix_shm_name_for(d.identity);
    if (shm_name(d) != expected) {
        throw ImportError(ErrorCode::INVALID_DESCRIPTOR, describe(d) + " names shm object '" +
                                                             std::string(shm_name(d)) + "', expected '" + expected +
                                                             "'");
    }
    const bool writable = grants_write(Access{d.access});
    const std::string path = "/" + expected;
    const int fd = ::shm_open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0);
    if (fd < 0) {
        const int err = errno;
        throw ImportError(err == ENOENT ? ErrorCode::UNKNOWN_BUFFER : ErrorCode::UNREACHABLE_BUFFER,
                          describe(d) + ": shm_open " + path + ": " + std::strerror(err));
    }
    ipc::UniqueFd owner(fd);
    struct stat st {};
    ipc::sys_check(::fstat(fd, &st), "fstat");
    if (static_cast<std::uint64_t>(st.st_size) < d.nbytes) {
        throw ImportError(ErrorCode::INVALID_DESCRIPTOR, describe(d) + ": shm object has " +
                                                             std::to_string(st.st_size) + " bytes, descriptor says " +
                                                             std::to_string(d.nbytes));
    }
    e.region = ipc::MappedRegion::map_shared(fd, d.nbytes, writable);
    e.base = e.region.data();
    return e.base;
}

VmmFds ImportRegistry::fetch_fds(const BufferDescriptor& d) {
    VmmFds got = fd_source_(d);
    if (got.fds.empty() || (!got.symmetric && got.fds.size() != 1) || got.rank >= got.fds.size()) {
        throw ImportError(ErrorCode::UNREACHABLE_BUFFER, describe(d) + ": the parent sent " +
                                                             std::to_string(got.fds.size()) + " fds for rank " +
                                                             std::to_string(got.rank));
    }
    return got;
}

std::byte* ImportRegistry::map_vmm(const BufferDescriptor& d) {
    const bool device = Backend{d.backend} == Backend::CUDA_VMM;
    if (!fd_source_ || (device && !device_mapper_)) {
        throw ImportError(ErrorCode::UNREACHABLE_BUFFER,
                          describe(d) + (device ? " is device memory this worker cannot map"
                                                : " cannot be reached from this worker"));
    }
    const VmmFds got = fetch_fds(d);
    Entry e{d, {}, nullptr, {}, {}, {}};
    if (device) {
        DeviceImport imported = device_mapper_(d, got);
        if (imported.bases.size() != got.fds.size()) {
            throw ImportError(ErrorCode::UNREACHABLE_BUFFER, describe(d) + ": mapped " +
                                                                 std::to_string(imported.bases.size()) + " of " +
                                                                 std::to_string(got.fds.size()) + " ranks");
        }
        e.device_owner = std::move(imported.owner);
        e.base = reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(imported.bases[got.rank]));
        for (const std::uint64_t base : imported.bases) {
            e.peers.bases.push_back(reinterpret_cast<std::byte*>(static_cast<std::uintptr_t>(base)));
        }
    } else {
        const bool writable = grants_write(Access{d.access});
        for (std::size_t r = 0; r < got.fds.size(); ++r) {
            struct stat st {};
            ipc::sys_check(::fstat(got.fds[r].get(), &st), "fstat");
            if (static_cast<std::uint64_t>(st.st_size) < d.nbytes) {
                throw ImportError(ErrorCode::INVALID_DESCRIPTOR,
                                  describe(d) + ": rank " + std::to_string(r) + " backing is smaller than nbytes");
            }
            // Peers' copies are read through the table; only the own copy takes the write grant.
            e.peer_regions.push_back(
                ipc::MappedRegion::map_shared(got.fds[r].get(), d.nbytes, writable && r == got.rank));
        }
        e.base = e.peer_regions[got.rank].data();
        for (const auto& region : e.peer_regions) {
            e.peers.bases.push_back(region.data());
        }
    }
    if (got.symmetric) {
        fill_peers(d, e, got.rank);
    } else {
        e.peers.bases.clear();
    }
    std::byte* base = e.base;
    entries_.emplace(d.identity, std::move(e));
    return base;
}

void ImportRegistry::fill_peers(const BufferDescriptor& d, Entry& e, std::uint32_t rank) {
    e.peers.rank = rank;
    // The local slot is the own mapping; no entry is null; no two entries alias.
    e.peers.bases[rank] = e.base;
    for (std::size_t r = 0; r < e.peers.bases.size(); ++r) {
        if (e.peers.bases[r] == nullptr) {
            throw ImportError(ErrorCode::UNREACHABLE_BUFFER,
                              describe(d) + ": peer table entry " + std::to_string(r) + " is null");
        }
        for (std::size_t q = 0; q < r; ++q) {
            if (e.peers.bases[r] == e.peers.bases[q]) {
                throw ImportError(ErrorCode::UNREACHABLE_BUFFER, describe(d) + ": peer table entries " +
                                                                     std::to_string(q) + " and " + std::to_string(r) +
                                                                     " alias");
            }
        }
    }
}

const PeerBases* ImportRegistry::peers(const CanonicalIdentity& id) const {
    const auto it = entries_.find(id);
    return it == entries_.end() || it->second.peers.bases.empty() ? nullptr : &it->second.peers;
}

std::byte* ImportRegistry::map_fork(const BufferDescriptor& d) {
    const std::uint64_t base = fork_base(d);
    for (const auto& [start, length] : arenas_) {
        if (base >= start && base - start <= length && d.nbytes <= length - (base - start)) {
            return reinterpret_cast<std::byte*>(base);
        }
    }
    throw ImportError(ErrorCode::UNREACHABLE_BUFFER,
                      describe(d) + " names an address outside every arena this worker inherited");
}

void ImportRegistry::release(const CanonicalIdentity& id) {
    for (auto it = entries_.begin(); it != entries_.end();) {
        it = same_slot(it->first, id) && it->first.generation <= id.generation ? entries_.erase(it) : std::next(it);
    }
    auto& newest = newest_generation_[slot_key(id)];
    newest = std::max(newest, id.generation + 1);
}

} // namespace canopy::worker
