#pragma once
// Event: a CUDA event of the current context (cuEventCreate), recorded on a stream to mark how far the stream's
// work has come. Created without timing (cheaper to record and query) and with blocking synchronization, so a
// thread that waits in synchronize() sleeps instead of spinning.
//
// Ownership: move-only; REQUIRES the context it was created in to outlive it.
// Thread safety: record() on the thread that queues work on the stream; query() and synchronize() may run on
// another thread where the context is current, as long as no record() of the same event runs at the same time.

#include "cuda/driver.h"

namespace canopy::cuda {

class Event {
public:
    // Creates an event in the current context. Throws CudaError.
    explicit Event(const Driver& driver);
    Event(Event&& other) noexcept;
    Event& operator=(Event&& other) noexcept;
    Event(const Event&) = delete;
    Event& operator=(const Event&) = delete;
    ~Event() { reset(); }

    // Marks the end of the work queued on `stream` so far. Throws CudaError.
    void record(CuStream stream) const;
    // Whether the work before the last record() has finished. Throws CudaError: the first error of that work
    // (the context's sticky error after a fault).
    bool query() const;
    // Waits until the work before the last record() has finished. Throws CudaError as query().
    void synchronize() const;

    CuEvent get() const noexcept { return event_; }

private:
    void reset() noexcept;

    const Driver* driver_;
    CuEvent event_ = nullptr;
};

} // namespace canopy::cuda
