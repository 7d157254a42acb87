#include "worker/cuda/chip_buffers.h"

#include "cuda/vmm.h"

#include <memory>
#include <string>
#include <vector>

namespace canopy::worker {
namespace {

// What a CUDA_VMM import keeps alive: per rank, the imported handle and its mapping (mapping last, so it is
// released first).
struct VmmImport {
    std::vector<cuda::VmmAllocation> allocations;
    std::vector<cuda::VmmMapping> mappings;
};

} // namespace

ChipBuffers::ChipBuffers(const cuda::Driver& driver, std::string chip_path, int device, FdSource fds)
    : driver_(driver), path_(std::move(chip_path)), device_(device),
      imports_(std::move(fds), [this](const BufferDescriptor& d, const VmmFds& got) { return import_vmm(d, got); }) {}

BufferAddresses ChipBuffers::materialize(const BufferDescriptor& d) {
    const Backend backend = d.backend;
    if (backend != Backend::POSIX_SHM && backend != Backend::CUDA_VMM) {
        throw ImportError(ErrorCode::UNREACHABLE_BUFFER, "cuda chip " + path_ + ": " + to_string(backend) +
                                                             " buffers cannot be reached from a cuda chip (buffer " +
                                                             to_string(d.identity) + ")");
    }
    // A newer generation makes the registry unmap the older ones: end their registrations first. An identity
    // already mapped had its older generations dropped at first sight.
    if (!imports_.contains(d.identity)) {
        drop_older(d.identity, d.identity.generation);
    }
    std::byte* base = imports_.materialize(d);
    if (backend == Backend::CUDA_VMM) {
        return {nullptr, static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(base))};
    }
    auto it = registrations_.find(d.identity);
    if (it == registrations_.end()) {
        const bool read_only = !grants_write(Access{d.access});
        it = registrations_.emplace(d.identity, cuda::HostRegistration(driver_, base, d.nbytes, read_only)).first;
    }
    return {base, it->second.device_pointer()};
}

DeviceImport ChipBuffers::import_vmm(const BufferDescriptor& d, const VmmFds& got) {
    auto imported = std::make_shared<VmmImport>();
    DeviceImport out;
    const bool writable = grants_write(Access{d.access});
    const std::string what =
        "cuda chip " + path_ + " (device " + std::to_string(device_) + "): buffer " + to_string(d.identity);
    for (std::size_t r = 0; r < got.fds.size(); ++r) {
        cuda::VmmAllocation allocation = cuda::VmmAllocation::import_fd(driver_, got.fds[r].get());
        const int lives_on = allocation.device();
        if (r == 0 && lives_on != static_cast<int>(d.device)) {
            throw ImportError(ErrorCode::INVALID_DESCRIPTOR, what + " names device " + std::to_string(d.device) +
                                                                 ", its memory lives on device " +
                                                                 std::to_string(lives_on));
        }
        if (!cuda::can_access_peer(driver_, device_, lives_on)) {
            throw ImportError(ErrorCode::UNREACHABLE_BUFFER,
                              what + (got.symmetric ? " (rank " + std::to_string(r) + ")" : std::string()) +
                                  " lives on device " + std::to_string(lives_on) +
                                  ", which this device cannot access (no peer access between them)");
        }
        const std::size_t bytes = cuda::vmm_padded_size(driver_, lives_on, d.nbytes);
        const bool own = !got.symmetric || r == got.rank;
        imported->mappings.emplace_back(driver_, allocation, bytes, device_, writable && own);
        imported->allocations.push_back(std::move(allocation));
        out.bases.push_back(imported->mappings.back().address());
    }
    out.owner = std::move(imported);
    return out;
}

const DevicePeers* ChipBuffers::peers(const CanonicalIdentity& id) {
    const auto found = peer_tables_.find(id);
    if (found != peer_tables_.end()) {
        return &found->second.second;
    }
    const PeerBases* bases = imports_.peers(id);
    if (bases == nullptr) {
        return nullptr;
    }
    // The registry built the table with the own mapping in the own slot and checked every entry.
    std::vector<std::uint64_t> table;
    for (std::byte* base : bases->bases) {
        table.push_back(static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(base)));
    }
    cuda::DeviceAllocation memory(driver_, table.size() * sizeof(std::uint64_t));
    memory.copy_from_host(table.data(), table.size() * sizeof(std::uint64_t));
    const DevicePeers peers{memory.get(), static_cast<std::uint32_t>(table.size()), bases->rank};
    return &peer_tables_.emplace(id, std::pair(std::move(memory), peers)).first->second.second;
}

ipc::UniqueFd ChipBuffers::create_vmm(const BufferDescriptor& d, bool rank_copy) {
    // The descriptor of a symmetric buffer names rank 0's device; every rank makes its copy on its own device.
    if (Backend{d.backend} != Backend::CUDA_VMM || (!rank_copy && d.device != static_cast<std::uint32_t>(device_))) {
        throw ImportError(ErrorCode::BAD_REQUEST, "cuda chip " + path_ + " (device " + std::to_string(device_) +
                                                      ") cannot create a " + to_string(Backend{d.backend}) +
                                                      " buffer of device " + std::to_string(d.device));
    }
    const std::size_t bytes = cuda::vmm_padded_size(driver_, device_, d.nbytes);
    cuda::VmmAllocation allocation = cuda::VmmAllocation::create(driver_, device_, bytes);
    {
        // Zero-filled, like every other backend's new buffer.
        const cuda::VmmMapping mapping(driver_, allocation, bytes, device_, true);
        CANOPY_CU(driver_, cuMemsetD8Async, mapping.address(), 0, bytes, nullptr);
        CANOPY_CU(driver_, cuStreamSynchronize, nullptr);
    }
    return ipc::UniqueFd(allocation.export_fd());
}

void ChipBuffers::release(const CanonicalIdentity& id) {
    drop_older(id, id.generation + 1);
    imports_.release(id);
}

void ChipBuffers::drop_older(const CanonicalIdentity& id, std::uint32_t below) {
    for (auto it = registrations_.begin(); it != registrations_.end();) {
        it = same_slot(it->first, id) && it->first.generation < below ? registrations_.erase(it) : std::next(it);
    }
    for (auto it = peer_tables_.begin(); it != peer_tables_.end();) {
        it = same_slot(it->first, id) && it->first.generation < below ? peer_tables_.erase(it) : std::next(it);
    }
}

} // namespace canopy::worker
