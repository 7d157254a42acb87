#pragma once
// Module: a CUDA module loaded from an in-memory image (a fatbin, cubin or PTX; cuModuleLoadData), its
// kernels looked up by name, and launch(), the one place canopy starts a kernel.
//
// Ownership: move-only; the module is unloaded on destruction. REQUIRES its context to be current when it is
// loaded and to outlive it. A function handle is valid while its module lives. The image is only read during
// load().
// Thread safety: function() and launch() may be called from any thread where the context is current.

#include "cuda/driver.h"

#include <cstddef>
#include <span>
#include <string>

namespace canopy::cuda {

struct Dim3 {
    unsigned int x = 1;
    unsigned int y = 1;
    unsigned int z = 1;
};

class Module {
public:
    // Loads `image` into the current context. Throws CudaError (e.g. CUDA_ERROR_NO_BINARY_FOR_GPU when the
    // image has no code for this device); std::invalid_argument for an empty image.
    Module(const Driver& driver, std::span<const std::byte> image);
    Module(Module&& other) noexcept;
    Module& operator=(Module&& other) noexcept;
    Module(const Module&) = delete;
    Module& operator=(const Module&) = delete;
    ~Module() { reset(); }

    // Loads `image` into the current context through the JIT with its error log captured
    // (cuModuleLoadDataEx): the path for images canopy did not build (user modules). A PTX image must end with a
    // NUL byte. On failure throws CudaError naming `what` ("module m"), with "; JIT log: ..." and the first
    // JIT_LOG_BYTES of the JIT's error log, lines joined by " | ", when it wrote one.
    static Module load_logged(const Driver& driver, std::span<const std::byte> image, const std::string& what);
    static constexpr std::size_t JIT_LOG_BYTES = 4096;

    // The kernel `name` (an extern "C" name). Throws CudaError naming the kernel when it is absent.
    CuFunction function(const std::string& name) const;

    CuModule get() const noexcept { return module_; }

private:
    Module(const Driver& driver, CuModule module) noexcept : driver_(&driver), module_(module) {}
    void reset() noexcept;

    const Driver* driver_;
    CuModule module_ = nullptr;
};

// Queues `function` on `stream` with `params` (one pointer per kernel parameter). Throws CudaError for a
// launch the driver refuses; faults inside the kernel surface at the next synchronization.
void launch(const Driver& driver, CuFunction function, Dim3 grid, Dim3 block, unsigned int shared_bytes,
            CuStream stream, void** params);

} // namespace canopy::cuda
