#include "cuda/stream.h"

#include <utility>

namespace canopy::cuda {

Stream::Stream(const Driver& driver) : driver_(&driver) {
    CANOPY_CU(driver, cuStreamCreate, &stream_, STREAM_NON_BLOCKING);
}

Stream::Stream(Stream&& other) noexcept : driver_(other.driver_), stream_(std::exchange(other.stream_, nullptr)) {}

Stream& Stream::operator=(Stream&& other) noexcept {
    if (this != &other) {
        reset();
        driver_ = other.driver_;
        stream_ = std::exchange(other.stream_, nullptr);
    }
    return *this;
}

void Stream::synchronize() const {
    CANOPY_CU(*driver_, cuStreamSynchronize, stream_);
}

void Stream::wait(CuEvent event) const {
    CANOPY_CU(*driver_, cuStreamWaitEvent, stream_, event, 0);
}

void Stream::reset() noexcept {
    if (stream_ != nullptr) {
        (void)driver_->api().cuStreamDestroy(stream_);
        stream_ = nullptr;
    }
}

} // namespace canopy::cuda
