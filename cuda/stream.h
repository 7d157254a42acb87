#pragma once
// Stream: a CUDA stream of the current context (cuStreamCreate, non-blocking with respect to the legacy
// default stream), destroyed with it.
//
// Ownership: move-only; REQUIRES the context it was created in to be current when it is created and to
// outlive it.
// Thread safety: a stream may be used from any thread where its context is current; canopy uses each from
// one thread.

#include "cuda/driver.h"

namespace canopy::cuda {

class Stream {
public:
    // Creates a stream in the current context. Throws CudaError.
    explicit Stream(const Driver& driver);
    Stream(Stream&& other) noexcept;
    Stream& operator=(Stream&& other) noexcept;
    Stream(const Stream&) = delete;
    Stream& operator=(const Stream&) = delete;
    ~Stream() { reset(); }

    // Waits until all work queued on the stream finished. Throws CudaError: the first error of that work,
    // e.g. CUDA_ERROR_ILLEGAL_ADDRESS from a faulting kernel.
    void synchronize() const;
    // Makes the work queued on this stream from now on wait until the work before `event`'s last record() has
    // finished (cuStreamWaitEvent); the calling thread does not wait. Throws CudaError.
    void wait(CuEvent event) const;

    CuStream get() const noexcept { return stream_; }

private:
    void reset() noexcept;

    const Driver* driver_;
    CuStream stream_ = nullptr;
};

} // namespace canopy::cuda
