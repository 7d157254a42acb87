#include "cuda/context.h"

#include <array>
#include <cstring>
#include <utility>

namespace canopy::cuda {

int device_count(const Driver& driver) {
    int count = 0;
    CANOPY_CU(driver, cuDeviceGetCount, &count);
    return count;
}

std::string device_name(const Driver& driver, int ordinal) {
    CuDevice device{};
    CANOPY_CU(driver, cuDeviceGet, &device, ordinal);
    std::array<char, 256> name{};
    CANOPY_CU(driver, cuDeviceGetName, name.data(), static_cast<int>(name.size() - 1), device);
    return std::string(name.data(), ::strnlen(name.data(), name.size()));
}

int device_attribute(const Driver& driver, int ordinal, int attribute) {
    CuDevice device{};
    CANOPY_CU(driver, cuDeviceGet, &device, ordinal);
    int value = 0;
    CANOPY_CU(driver, cuDeviceGetAttribute, &value, static_cast<CuDeviceAttribute>(attribute), device);
    return value;
}

PrimaryContext::PrimaryContext(const Driver& driver, int ordinal) : driver_(&driver), ordinal_(ordinal) {
    CANOPY_CU(driver, cuDeviceGet, &device_, ordinal);
    CANOPY_CU(driver, cuDevicePrimaryCtxRetain, &context_, device_);
    try {
        make_current();
    } catch (...) {
        reset();
        throw;
    }
}

PrimaryContext::PrimaryContext(PrimaryContext&& other) noexcept
    : driver_(other.driver_), ordinal_(other.ordinal_), device_(other.device_),
      context_(std::exchange(other.context_, nullptr)) {}

PrimaryContext& PrimaryContext::operator=(PrimaryContext&& other) noexcept {
    if (this != &other) {
        reset();
        driver_ = other.driver_;
        ordinal_ = other.ordinal_;
        device_ = other.device_;
        context_ = std::exchange(other.context_, nullptr);
    }
    return *this;
}

void PrimaryContext::make_current() const {
    CANOPY_CU(*driver_, cuCtxSetCurrent, context_);
}

void PrimaryContext::synchronize() const {
    CANOPY_CU(*driver_, cuCtxSynchronize);
}

// Release errors are ignored: after a sticky error every call fails, and a destructor has no one to tell.
void PrimaryContext::reset() noexcept {
    if (context_ != nullptr) {
        (void)driver_->api().cuDevicePrimaryCtxRelease(device_);
        context_ = nullptr;
    }
}

} // namespace canopy::cuda
