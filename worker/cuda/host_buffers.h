#pragma once
// HostBuffers: a cuda chip's access to host buffers. It maps each buffer through an ImportRegistry (map-once by
// identity; POSIX_SHM opened by the name derived from its identity and refused when smaller than nbytes),
// registers the mapping with the chip's context once per identity (cuMemHostRegister with DEVICEMAP, plus
// READ_ONLY for a buffer granted read access only, whose mapping is read-only), and hands out both addresses.
//
// A registration always ends before its mapping: release() and a newer generation of a slot unregister first,
// then let the registry unmap; destruction unregisters everything before the registry unmaps.
//
// Served backends: POSIX_SHM. CUDA_VMM, SIM_VMM, FORK_SHM and FORK_COW buffers are refused with
// UNREACHABLE_BUFFER naming the backend ("cuda chip /chip0: cuda_vmm buffers are not supported yet").
//
// Ownership: borrows the driver; REQUIRES the context registrations are made in to be current and to outlive
// the HostBuffers.
// Thread safety: none; the chip's main thread owns it.

#include "cuda/memory.h"
#include "protocol/descriptor.h"
#include "worker/import_registry.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace canopy::worker {

struct BufferAddresses {
    std::byte* host;      // byte 0 of the buffer in this process
    std::uint64_t device; // byte 0 of the buffer for this chip's kernels
};

class HostBuffers {
public:
    // `chip_path` ("/chip0") prefixes refusals.
    HostBuffers(const cuda::Driver& driver, std::string chip_path);
    HostBuffers(const HostBuffers&) = delete;
    HostBuffers& operator=(const HostBuffers&) = delete;

    // Maps and registers the buffer on first sight. Throws ImportError (STALE_BUFFER, UNKNOWN_BUFFER,
    // INVALID_DESCRIPTOR, UNREACHABLE_BUFFER) or CudaError (a registration the driver refuses).
    BufferAddresses materialize(const BufferDescriptor& d);

    // Unregisters and unmaps this identity and every older generation of its slot; no-op if absent.
    void release(const CanonicalIdentity& id);

    std::size_t registered() const noexcept { return registrations_.size(); }

private:
    // Ends the registrations of `id`'s slot whose generation is below `below`.
    void unregister_older(const CanonicalIdentity& id, std::uint32_t below);

    const cuda::Driver& driver_;
    std::string path_;
    ImportRegistry imports_;
    // Declared after imports_, so destroyed before it: every registration ends before its mapping.
    std::unordered_map<CanonicalIdentity, cuda::HostRegistration> registrations_;
};

} // namespace canopy::worker
