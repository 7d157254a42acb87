#include "worker/cuda/host_buffers.h"

#include <string>

namespace canopy::worker {

HostBuffers::HostBuffers(const cuda::Driver& driver, std::string chip_path)
    : driver_(driver), path_(std::move(chip_path)) {}

BufferAddresses HostBuffers::materialize(const BufferDescriptor& d) {
    const Backend backend = d.backend;
    if (backend != Backend::POSIX_SHM) {
        throw ImportError(ErrorCode::UNREACHABLE_BUFFER, "cuda chip " + path_ + ": " + to_string(backend) +
                                                             " buffers are not supported yet (buffer " +
                                                             to_string(d.identity) + ")");
    }
    // A newer generation makes the registry unmap the older ones: end their registrations first.
    unregister_older(d.identity, d.identity.generation);
    std::byte* host = imports_.materialize(d);
    auto it = registrations_.find(d.identity);
    if (it == registrations_.end()) {
        const bool read_only = !grants_write(Access{d.access});
        it = registrations_.emplace(d.identity, cuda::HostRegistration(driver_, host, d.nbytes, read_only)).first;
    }
    return {host, it->second.device_pointer()};
}

void HostBuffers::release(const CanonicalIdentity& id) {
    unregister_older(id, id.generation + 1);
    imports_.release(id);
}

void HostBuffers::unregister_older(const CanonicalIdentity& id, std::uint32_t below) {
    for (auto it = registrations_.begin(); it != registrations_.end();) {
        it = same_slot(it->first, id) && it->first.generation < below ? registrations_.erase(it) : std::next(it);
    }
}

} // namespace canopy::worker
