#pragma once
// Event: a CUDA event of the current context (cuEventCreate), recorded on a stream to mark how far the stream's
// work has come. Created without timing (cheaper to record and query), and either
//   Wait::SLEEP  with blocking synchronization: a thread in synchronize() sleeps until the GPU's interrupt for the
//                event wakes it. The GPU raises that interrupt as records complete, waited for or not: with an
//                event recorded per task, up to one interrupt per task, all taken by one CPU, where each cost the
//                thread running there about 30 us on the H200 machines (docs/gpu.md);
//   Wait::POLL   without it: no interrupt; query() is how it is waited for (synchronize() would spin or yield,
//                by the context's scheduling flags).
//
// Ownership: move-only; REQUIRES the context it was created in to outlive it.
// Thread safety: record() on the thread that queues work on the stream; query() and synchronize() may run on
// another thread where the context is current, as long as no record() of the same event runs at the same time.

#include "cuda/driver.h"

namespace canopy::cuda {

class Event {
public:
    enum class Wait { SLEEP, POLL };

    // Creates an event in the current context. Throws CudaError.
    explicit Event(const Driver& driver, Wait wait);
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
