#pragma once
// The CUDA driver API, loaded at run time with dlopen so that every canopy binary starts and serves
// CPU-only topologies on a machine without an NVIDIA driver. Entry points are resolved once, through
// cuGetProcAddress, for the driver API version canopy is written against.
//
// Only chip workers of backend `cuda` call Driver::get(): the supervisor and the zygote never load the
// driver (a process forked after its parent initialized CUDA cannot use CUDA).
//
// Thread safety: Driver::get() is safe from any thread (std::call_once); the returned table is immutable.

#include <cstdint>
#include <stdexcept>
#include <string>

namespace canopy::cuda {

// CUresult values are ints; 0 is CUDA_SUCCESS.
using CuResult = int;
using CuDevice = int;

// A failed driver call or a missing driver. what() names the call and the CUDA error name, e.g.
// "cuMemCreate: CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
class CudaError : public std::runtime_error {
public:
    CudaError(std::string call, CuResult result, const std::string& message);
    const std::string& call() const noexcept { return call_; }
    CuResult result() const noexcept { return result_; }

private:
    std::string call_;
    CuResult result_;
};

// Result value used when no CUresult applies (the library or an entry point is missing).
inline constexpr CuResult DRIVER_NOT_LOADED = -1;

struct DriverApi {
    CuResult (*cuInit)(unsigned int flags) = nullptr;
    CuResult (*cuDriverGetVersion)(int* version) = nullptr;
    CuResult (*cuDeviceGetCount)(int* count) = nullptr;
    CuResult (*cuDeviceGet)(CuDevice* device, int ordinal) = nullptr;
    CuResult (*cuGetErrorName)(CuResult error, const char** name) = nullptr;
    CuResult (*cuGetErrorString)(CuResult error, const char** text) = nullptr;
};

class Driver {
public:
    // The process-wide driver, loaded and initialized (cuInit) on first use from "libcuda.so.1".
    // Throws CudaError naming the library and dlerror() when it is absent, or cuInit's error.
    static const Driver& get();

    // Loads from an explicit library path or soname; used by get() and by tests.
    static Driver load(const std::string& library);

    const DriverApi& api() const noexcept { return api_; }
    int version() const noexcept { return version_; }

    // Turns a CUresult into CudaError naming `call`; does nothing for success.
    void check(CuResult result, const char* call) const;
    std::string error_name(CuResult result) const;

private:
    DriverApi api_{};
    int version_ = 0;
};

// Throws CudaError(call, result) when result is not CUDA_SUCCESS; the one place CUresults become errors.
#define CANOPY_CU(driver, call, ...) (driver).check((driver).api().call(__VA_ARGS__), #call)

} // namespace canopy::cuda
