#pragma once
// Devices and their primary contexts.
//
// A PrimaryContext retains one device's primary context (cuDevicePrimaryCtxRetain) and makes it current on
// the thread that retained it; it releases the context on destruction. The primary context is shared by
// everything in the process that uses that device, so a worker that owns one device retains exactly one.
//
// Ownership: move-only; the Driver must outlive it. Every Stream, Module, DeviceAllocation and
// HostRegistration of the context must be destroyed before it (declare them after it).
// Thread safety: the context is current on the constructing thread only; make_current() binds it to another.

#include "cuda/driver.h"

#include <string>

namespace canopy::cuda {

// Number of devices the driver shows this process (CUDA_VISIBLE_DEVICES applies). Throws CudaError.
int device_count(const Driver& driver);

// "NVIDIA H200" for device `ordinal`. Throws CudaError.
std::string device_name(const Driver& driver, int ordinal);

// A device attribute (cuDeviceGetAttribute); `attribute` is one of the ATTRIBUTE_* values. Throws CudaError.
int device_attribute(const Driver& driver, int ordinal, int attribute);

class PrimaryContext {
public:
    // Retains device `ordinal`'s primary context and makes it current. Throws CudaError.
    PrimaryContext(const Driver& driver, int ordinal);
    PrimaryContext(PrimaryContext&& other) noexcept;
    PrimaryContext& operator=(PrimaryContext&& other) noexcept;
    PrimaryContext(const PrimaryContext&) = delete;
    PrimaryContext& operator=(const PrimaryContext&) = delete;
    ~PrimaryContext() { reset(); }

    // Makes the context current on the calling thread. Throws CudaError.
    void make_current() const;
    // Waits for all work of the context (cuCtxSynchronize). Throws CudaError, e.g. the sticky error of an
    // earlier fault.
    void synchronize() const;

    CuContext get() const noexcept { return context_; }
    CuDevice device() const noexcept { return device_; }
    int ordinal() const noexcept { return ordinal_; }
    const Driver& driver() const noexcept { return *driver_; }

private:
    void reset() noexcept;

    const Driver* driver_;
    int ordinal_;
    CuDevice device_{};
    CuContext context_ = nullptr;
};

} // namespace canopy::cuda
