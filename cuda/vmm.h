#pragma once
// CUDA virtual memory management: the backing of CUDA_VMM buffers.
//
// VmmAllocation owns one physical allocation handle (cuMemCreate on a device, with a POSIX file-descriptor
// handle type so that it can be exported; or cuMemImportFromShareableHandle of such an fd). VmmMapping owns a
// reserved virtual address range with an allocation mapped into it and access granted to one device. The
// memory lives while any handle, mapping or exported fd exists in any process: a mapping outlives the handle it
// was made from, and an exported fd keeps the memory alive until it is closed.
//
// Sizes are padded to the device's recommended allocation granularity (vmm_padded_size); the creator and every
// importer compute the same padded size from the buffer's nbytes and device.
//
// Ownership: move-only. REQUIRES the context they were made in to outlive them.
// Thread safety: none beyond the driver's.

#include "cuda/driver.h"

#include <cstddef>

namespace canopy::cuda {

// The recommended granularity of pinned allocations on `device`, and `bytes` rounded up to it.
std::size_t vmm_granularity(const Driver& driver, int device);
std::size_t vmm_padded_size(const Driver& driver, int device, std::size_t bytes);

// Whether `device` can map memory that lives on `peer` (true for device == peer).
bool can_access_peer(const Driver& driver, int device, int peer);

class VmmAllocation {
public:
    // A new allocation of `bytes` (a multiple of the granularity) on `device`, exportable as an fd.
    static VmmAllocation create(const Driver& driver, int device, std::size_t bytes);
    // Imports an exported fd; the fd stays open and owned by the caller. The driver does not report an
    // imported allocation's size: size() is 0 and mappings name the padded size themselves.
    static VmmAllocation import_fd(const Driver& driver, int fd);

    VmmAllocation(VmmAllocation&& other) noexcept;
    VmmAllocation& operator=(VmmAllocation&& other) noexcept;
    VmmAllocation(const VmmAllocation&) = delete;
    VmmAllocation& operator=(const VmmAllocation&) = delete;
    ~VmmAllocation() { reset(); }

    // A new fd for this allocation; the caller owns it (close it to drop the reference it holds).
    int export_fd() const;
    // The device the memory lives on.
    int device() const;
    CuMemHandle handle() const noexcept { return handle_; }
    std::size_t size() const noexcept { return bytes_; }

private:
    VmmAllocation(const Driver& driver, CuMemHandle handle, std::size_t bytes)
        : driver_(&driver), handle_(handle), bytes_(bytes), owned_(true) {}
    void reset() noexcept;

    const Driver* driver_;
    CuMemHandle handle_ = 0;
    std::size_t bytes_ = 0;
    bool owned_ = false;
};

class VmmMapping {
public:
    // Reserves `bytes` (the allocation's padded size) of address space, maps the allocation there and grants `accessor`
    // (a device ordinal) read and write access, or read access only when `writable` is false and the driver supports
    // read-only device mappings (else read-write; canopy enforces access grants at submit). Throws CudaError.
    VmmMapping(const Driver& driver, const VmmAllocation& allocation, std::size_t bytes, int accessor, bool writable);
    VmmMapping(VmmMapping&& other) noexcept;
    VmmMapping& operator=(VmmMapping&& other) noexcept;
    VmmMapping(const VmmMapping&) = delete;
    VmmMapping& operator=(const VmmMapping&) = delete;
    ~VmmMapping() { reset(); }

    CuDevicePtr address() const noexcept { return address_; }
    std::size_t size() const noexcept { return bytes_; }
    bool read_only() const noexcept { return read_only_; }

private:
    void reset() noexcept;

    const Driver* driver_;
    CuDevicePtr address_ = 0;
    std::size_t bytes_ = 0;
    bool mapped_ = false;
    bool read_only_ = false;
};

} // namespace canopy::cuda
