#pragma once
// Device memory and host memory made visible to a device.
//
// DeviceAllocation: cuMemAlloc'ed memory of the current context, freed on destruction, with blocking copies to
// and from the host.
// HostRegistration: a host range page-locked and mapped into the device's address space (cuMemHostRegister
// with DEVICEMAP, and READ_ONLY for a range the process mapped read-only, which the driver otherwise refuses);
// device_pointer() is the address kernels use for the range's first byte. Unregistered on destruction.
//
// Ownership: move-only. REQUIRES the context they were made in to outlive them. A HostRegistration must end
// before the host range is unmapped: declare it after (destroy it before) the mapping's owner.
// Thread safety: none beyond the driver's; canopy uses each from one thread.

#include "cuda/driver.h"

#include <cstddef>

namespace canopy::cuda {

class DeviceAllocation {
public:
    // Allocates `bytes` (> 0) in the current context. Throws CudaError.
    DeviceAllocation(const Driver& driver, std::size_t bytes);
    DeviceAllocation(DeviceAllocation&& other) noexcept;
    DeviceAllocation& operator=(DeviceAllocation&& other) noexcept;
    DeviceAllocation(const DeviceAllocation&) = delete;
    DeviceAllocation& operator=(const DeviceAllocation&) = delete;
    ~DeviceAllocation() { reset(); }

    // Blocking copies of `bytes` bytes at byte `offset` of the allocation. REQUIRES offset + bytes <= size().
    // Throws CudaError (and std::out_of_range for a range past the allocation).
    void copy_from_host(const void* source, std::size_t bytes, std::size_t offset = 0) const;
    void copy_to_host(void* destination, std::size_t bytes, std::size_t offset = 0) const;

    CuDevicePtr get() const noexcept { return pointer_; }
    std::size_t size() const noexcept { return bytes_; }

private:
    void check_range(std::size_t bytes, std::size_t offset) const;
    void reset() noexcept;

    const Driver* driver_;
    CuDevicePtr pointer_ = 0;
    std::size_t bytes_ = 0;
};

class HostRegistration {
public:
    // Registers [host, host + bytes) with the current context; `read_only` for a range mapped without write
    // permission. Throws CudaError.
    HostRegistration(const Driver& driver, void* host, std::size_t bytes, bool read_only);
    HostRegistration(HostRegistration&& other) noexcept;
    HostRegistration& operator=(HostRegistration&& other) noexcept;
    HostRegistration(const HostRegistration&) = delete;
    HostRegistration& operator=(const HostRegistration&) = delete;
    ~HostRegistration() { reset(); }

    void* host() const noexcept { return host_; }
    std::size_t size() const noexcept { return bytes_; }
    bool read_only() const noexcept { return read_only_; }
    // The device address of host()'s first byte.
    CuDevicePtr device_pointer() const noexcept { return device_; }

private:
    void reset() noexcept;

    const Driver* driver_;
    void* host_ = nullptr;
    std::size_t bytes_ = 0;
    bool read_only_ = false;
    CuDevicePtr device_ = 0;
};

} // namespace canopy::cuda
