#include "cuda/memory.h"

#include <stdexcept>
#include <string>
#include <utility>

namespace canopy::cuda {

DeviceAllocation::DeviceAllocation(const Driver& driver, std::size_t bytes) : driver_(&driver) {
    if (bytes == 0) {
        throw std::invalid_argument("cuMemAlloc: a device allocation needs at least one byte");
    }
    CANOPY_CU(driver, cuMemAlloc, &pointer_, bytes);
    bytes_ = bytes;
}

DeviceAllocation::DeviceAllocation(DeviceAllocation&& other) noexcept
    : driver_(other.driver_), pointer_(std::exchange(other.pointer_, 0)), bytes_(std::exchange(other.bytes_, 0)) {}

DeviceAllocation& DeviceAllocation::operator=(DeviceAllocation&& other) noexcept {
    if (this != &other) {
        reset();
        driver_ = other.driver_;
        pointer_ = std::exchange(other.pointer_, 0);
        bytes_ = std::exchange(other.bytes_, 0);
    }
    return *this;
}

void DeviceAllocation::check_range(std::size_t bytes, std::size_t offset) const {
    if (offset > bytes_ || bytes > bytes_ - offset) {
        throw std::out_of_range("device allocation of " + std::to_string(bytes_) + " bytes has no range [" +
                                std::to_string(offset) + ", +" + std::to_string(bytes) + ")");
    }
}

void DeviceAllocation::copy_from_host(const void* source, std::size_t bytes, std::size_t offset) const {
    check_range(bytes, offset);
    CANOPY_CU(*driver_, cuMemcpyHtoD, pointer_ + offset, source, bytes);
}

void DeviceAllocation::copy_to_host(void* destination, std::size_t bytes, std::size_t offset) const {
    check_range(bytes, offset);
    CANOPY_CU(*driver_, cuMemcpyDtoH, destination, pointer_ + offset, bytes);
}

void DeviceAllocation::reset() noexcept {
    if (pointer_ != 0) {
        (void)driver_->api().cuMemFree(pointer_);
        pointer_ = 0;
        bytes_ = 0;
    }
}

HostRegistration::HostRegistration(const Driver& driver, void* host, std::size_t bytes, bool read_only)
    : driver_(&driver), read_only_(read_only) {
    const unsigned int flags = HOST_REGISTER_DEVICEMAP | (read_only ? HOST_REGISTER_READ_ONLY : 0u);
    CANOPY_CU(driver, cuMemHostRegister, host, bytes, flags);
    host_ = host;
    bytes_ = bytes;
    try {
        CANOPY_CU(driver, cuMemHostGetDevicePointer, &device_, host, 0);
    } catch (...) {
        reset();
        throw;
    }
}

HostRegistration::HostRegistration(HostRegistration&& other) noexcept
    : driver_(other.driver_), host_(std::exchange(other.host_, nullptr)), bytes_(std::exchange(other.bytes_, 0)),
      read_only_(other.read_only_), device_(std::exchange(other.device_, 0)) {}

HostRegistration& HostRegistration::operator=(HostRegistration&& other) noexcept {
    if (this != &other) {
        reset();
        driver_ = other.driver_;
        host_ = std::exchange(other.host_, nullptr);
        bytes_ = std::exchange(other.bytes_, 0);
        read_only_ = other.read_only_;
        device_ = std::exchange(other.device_, 0);
    }
    return *this;
}

void HostRegistration::reset() noexcept {
    if (host_ != nullptr) {
        (void)driver_->api().cuMemHostUnregister(host_);
        host_ = nullptr;
        bytes_ = 0;
        device_ = 0;
    }
}

} // namespace canopy::cuda
