#pragma once
// ChipBuffers: the buffers a cuda chip's kernels address.
//
// Every buffer goes through one ImportRegistry (map-once by identity, generations, release):
// - POSIX_SHM: opened by the name derived from its identity and refused when smaller than nbytes, then
//   registered with the chip's context once per identity (cuMemHostRegister with DEVICEMAP, plus READ_ONLY
//   for a buffer granted read access only, whose mapping is read-only). Kernels reach it through the
//   registration's device address; the host address serves the CPU built-ins.
// - CUDA_VMM: the fds (one, or one per rank of a symmetric buffer) come from the parent by identity; each is
//   imported, mapped into a reserved range and made accessible to this chip's device. Memory of another GPU is
//   refused with UNREACHABLE_BUFFER where the hardware has no peer access; an allocation that does not live on
//   the device its descriptor names is refused with INVALID_DESCRIPTOR. A symmetric buffer also gets a peer
//   table in device memory: one device address per rank, the chip's own mapping in its own slot, every entry
//   checked (non-null, distinct) before upload. There is no host address (BufferAddresses::host is null).
// - SIM_VMM, FORK_SHM, FORK_COW: refused with UNREACHABLE_BUFFER naming the backend.
//
// create_vmm() makes a new CUDA_VMM allocation on this chip's device, zero-filled, and returns its exported
// fd; the chip hands that to its parent, which holds it for the buffer's lifetime.
//
// A registration always ends before its mapping: release() and a newer generation of a slot unregister first,
// then let the registry unmap; destruction unregisters everything before the registry unmaps.
//
// Ownership: borrows the driver; REQUIRES the context everything is made in to be current and to outlive the
// ChipBuffers.
// Thread safety: none; the chip's main thread owns it.

#include "cuda/memory.h"
#include "ipc/unique_fd.h"
#include "protocol/descriptor.h"
#include "worker/import_registry.h"

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>

namespace canopy::worker {

struct BufferAddresses {
    std::byte* host;      // byte 0 of the buffer in this process; null for device memory
    std::uint64_t device; // byte 0 of the buffer for this chip's kernels
};

// The device-resident peer table of a symmetric buffer: `table` holds `world` device addresses.
struct DevicePeers {
    std::uint64_t table;
    std::uint32_t world;
    std::uint32_t rank;
};

class ChipBuffers {
public:
    // `chip_path` ("/chip0") prefixes refusals; `device` is the chip's device ordinal; `fds` fetches the fds
    // of VMM buffers from the parent.
    ChipBuffers(const cuda::Driver& driver, std::string chip_path, int device, FdSource fds);
    ChipBuffers(const ChipBuffers&) = delete;
    ChipBuffers& operator=(const ChipBuffers&) = delete;

    // Maps (and registers or imports) the buffer on first sight. Throws ImportError (STALE_BUFFER,
    // UNKNOWN_BUFFER, INVALID_DESCRIPTOR, UNREACHABLE_BUFFER) or CudaError.
    BufferAddresses materialize(const BufferDescriptor& d);

    // The peer table of a materialized symmetric CUDA_VMM buffer as device addresses in host memory (for the
    // host-side checks), and in device memory (for the kernels); nullptr for any other buffer.
    const PeerBases* peer_bases(const CanonicalIdentity& id) const { return imports_.peers(id); }
    const DevicePeers* peers(const CanonicalIdentity& id);

    // A new zero-filled CUDA_VMM allocation of d.nbytes (padded to the granularity) on this chip's device;
    // returns its exported fd. `rank_copy`: the allocation is this chip's copy of a symmetric buffer (whose
    // descriptor names rank 0's device). Throws ImportError(BAD_REQUEST) for a descriptor of another backend,
    // or of another device for a plain buffer; CudaError when the driver refuses.
    ipc::UniqueFd create_vmm(const BufferDescriptor& d, bool rank_copy);

    // Unregisters and unmaps this identity and every older generation of its slot; no-op if absent.
    void release(const CanonicalIdentity& id);

    std::size_t registered() const noexcept { return registrations_.size(); }

private:
    DeviceImport import_vmm(const BufferDescriptor& d, const VmmFds& fds);
    // Ends the registrations and peer tables of `id`'s slot whose generation is below `below`.
    void drop_older(const CanonicalIdentity& id, std::uint32_t below);

    const cuda::Driver& driver_;
    std::string path_;
    int device_;
    ImportRegistry imports_;
    // Declared after imports_, so destroyed before it: every registration ends before its mapping.
    std::unordered_map<CanonicalIdentity, cuda::HostRegistration> registrations_;
    std::unordered_map<CanonicalIdentity, std::pair<cuda::DeviceAllocation, DevicePeers>> peer_tables_;
};

} // namespace canopy::worker
