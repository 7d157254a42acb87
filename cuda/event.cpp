#include "cuda/event.h"

#include <utility>

namespace canopy::cuda {

Event::Event(const Driver& driver, Wait wait) : driver_(&driver) {
    CANOPY_CU(driver, cuEventCreate, &event_, EVENT_DISABLE_TIMING | (wait == Wait::SLEEP ? EVENT_BLOCKING_SYNC : 0U));
}

Event::Event(Event&& other) noexcept : driver_(other.driver_), event_(std::exchange(other.event_, nullptr)) {}

Event& Event::operator=(Event&& other) noexcept {
    if (this != &other) {
        reset();
        driver_ = other.driver_;
        event_ = std::exchange(other.event_, nullptr);
    }
    return *this;
}

void Event::record(CuStream stream) const {
    CANOPY_CU(*driver_, cuEventRecord, event_, stream);
}

bool Event::query() const {
    const CuResult result = driver_->api().cuEventQuery(event_);
    if (result == ERROR_NOT_READY) {
        return false;
    }
    driver_->check(result, "cuEventQuery");
    return true;
}

void Event::synchronize() const {
    CANOPY_CU(*driver_, cuEventSynchronize, event_);
}

void Event::reset() noexcept {
    if (event_ != nullptr) {
        (void)driver_->api().cuEventDestroy(event_);
        event_ = nullptr;
    }
}

} // namespace canopy::cuda
