#include "cuda/vmm.h"

#include <cstdint>
#include <string>
#include <utility>

namespace canopy::cuda {
namespace {

CuMemAllocationProp device_prop(int device) {
    CuMemAllocationProp prop{};
    prop.type = static_cast<decltype(prop.type)>(MEM_ALLOCATION_TYPE_PINNED);
    prop.requestedHandleTypes = static_cast<decltype(prop.requestedHandleTypes)>(MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    prop.location.type = static_cast<decltype(prop.location.type)>(MEM_LOCATION_TYPE_DEVICE);
    prop.location.id = device;
    return prop;
}

CuMemAccessDesc access_for(int device, int flags) {
    CuMemAccessDesc desc{};
    desc.location.type = static_cast<decltype(desc.location.type)>(MEM_LOCATION_TYPE_DEVICE);
    desc.location.id = device;
    desc.flags = static_cast<decltype(desc.flags)>(flags);
    return desc;
}

} // namespace

std::size_t vmm_granularity(const Driver& driver, int device) {
    const CuMemAllocationProp prop = device_prop(device);
    std::size_t granularity = 0;
    CANOPY_CU(driver, cuMemGetAllocationGranularity, &granularity, &prop,
              static_cast<CuMemGranularityFlags>(MEM_ALLOC_GRANULARITY_RECOMMENDED));
    return granularity == 0 ? 1 : granularity;
}

std::size_t vmm_padded_size(const Driver& driver, int device, std::size_t bytes) {
    const std::size_t g = vmm_granularity(driver, device);
    if (bytes > SIZE_MAX - (g - 1)) {
        throw CudaError("cuMemCreate", ERROR_INVALID_VALUE, std::to_string(bytes) + " bytes cannot be padded");
    }
    return (bytes + g - 1) / g * g;
}

bool can_access_peer(const Driver& driver, int device, int peer) {
    if (device == peer) {
        return true;
    }
    CuDevice d{};
    CuDevice p{};
    CANOPY_CU(driver, cuDeviceGet, &d, device);
    CANOPY_CU(driver, cuDeviceGet, &p, peer);
    int can = 0;
    CANOPY_CU(driver, cuDeviceCanAccessPeer, &can, d, p);
    return can != 0;
}

VmmAllocation VmmAllocation::create(const Driver& driver, int device, std::size_t bytes) {
    const CuMemAllocationProp prop = device_prop(device);
    CuMemHandle handle{};
    driver.check(driver.api().cuMemCreate(&handle, bytes, &prop, 0), "cuMemCreate",
                 std::to_string(bytes) + " bytes on device " + std::to_string(device));
    return VmmAllocation(driver, handle, bytes);
}

VmmAllocation VmmAllocation::import_fd(const Driver& driver, int fd) {
    CuMemHandle handle{};
    // The fd's value, cast to a pointer, is the handle; its address would be wrong.
    CANOPY_CU(driver, cuMemImportFromShareableHandle, &handle, reinterpret_cast<void*>(static_cast<std::uintptr_t>(fd)),
              static_cast<CuMemHandleType>(MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
    return VmmAllocation(driver, handle, 0);
}

VmmAllocation::VmmAllocation(VmmAllocation&& other) noexcept
    : driver_(other.driver_), handle_(std::exchange(other.handle_, 0)), bytes_(std::exchange(other.bytes_, 0)),
      owned_(std::exchange(other.owned_, false)) {}

VmmAllocation& VmmAllocation::operator=(VmmAllocation&& other) noexcept {
    if (this != &other) {
        reset();
        driver_ = other.driver_;
        handle_ = std::exchange(other.handle_, 0);
        bytes_ = std::exchange(other.bytes_, 0);
        owned_ = std::exchange(other.owned_, false);
    }
    return *this;
}

int VmmAllocation::export_fd() const {
    int fd = -1;
    CANOPY_CU(*driver_, cuMemExportToShareableHandle, &fd, handle_,
              static_cast<CuMemHandleType>(MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR), 0);
    return fd;
}

int VmmAllocation::device() const {
    CuMemAllocationProp prop{};
    CANOPY_CU(*driver_, cuMemGetAllocationPropertiesFromHandle, &prop, handle_);
    return prop.location.id;
}

void VmmAllocation::reset() noexcept {
    if (owned_) {
        (void)driver_->api().cuMemRelease(handle_);
        owned_ = false;
        handle_ = 0;
        bytes_ = 0;
    }
}

VmmMapping::VmmMapping(const Driver& driver, const VmmAllocation& allocation, std::size_t bytes, int accessor,
                       bool writable)
    : driver_(&driver) {
    CANOPY_CU(driver, cuMemAddressReserve, &address_, bytes, 0, 0, 0);
    bytes_ = bytes;
    try {
        driver.check(driver.api().cuMemMap(address_, bytes, 0, allocation.handle(), 0), "cuMemMap",
                     std::to_string(bytes) + " bytes");
        mapped_ = true;
        CuResult r = ERROR_NOT_SUPPORTED;
        if (!writable) {
            const CuMemAccessDesc read = access_for(accessor, MEM_ACCESS_FLAGS_PROT_READ);
            r = driver.api().cuMemSetAccess(address_, bytes, &read, 1);
            read_only_ = r == 0;
        }
        if (r != 0) {
            const CuMemAccessDesc rw = access_for(accessor, MEM_ACCESS_FLAGS_PROT_READWRITE);
            driver.check(driver.api().cuMemSetAccess(address_, bytes, &rw, 1), "cuMemSetAccess",
                         "device " + std::to_string(accessor) + " on memory of device " +
                             std::to_string(allocation.device()));
        }
    } catch (...) {
        reset();
        throw;
    }
}

VmmMapping::VmmMapping(VmmMapping&& other) noexcept
    : driver_(other.driver_), address_(std::exchange(other.address_, 0)), bytes_(std::exchange(other.bytes_, 0)),
      mapped_(std::exchange(other.mapped_, false)), read_only_(other.read_only_) {}

VmmMapping& VmmMapping::operator=(VmmMapping&& other) noexcept {
    if (this != &other) {
        reset();
        driver_ = other.driver_;
        address_ = std::exchange(other.address_, 0);
        bytes_ = std::exchange(other.bytes_, 0);
        mapped_ = std::exchange(other.mapped_, false);
        read_only_ = other.read_only_;
    }
    return *this;
}

void VmmMapping::reset() noexcept {
    if (mapped_) {
        (void)driver_->api().cuMemUnmap(address_, bytes_);
        mapped_ = false;
    }
    if (address_ != 0) {
        (void)driver_->api().cuMemAddressFree(address_, bytes_);
        address_ = 0;
        bytes_ = 0;
    }
}

} // namespace canopy::cuda
