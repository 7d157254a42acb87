#pragma once
// The CUDA driver API, loaded at run time with dlopen so that every canopy binary starts and serves
// CPU-only topologies on a machine without an NVIDIA driver, and no canopy binary links libcuda or libcudart.
// Entry points are resolved once, through cuGetProcAddress, for the driver API version canopy is written
// against (API_VERSION, CUDA 12.0 semantics).
//
// Only chip workers of backend `cuda` call Driver::get(): the supervisor and the zygote never load the
// driver (a process forked after its parent initialized CUDA cannot use CUDA).
//
// Every failed call becomes a CudaError through CANOPY_CU, the one place where a CUresult turns into an
// error: its message names the call and the CUDA error name, e.g.
// "cuMemHostRegister: CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED (part or all of the requested memory range is
// already mapped)".
//
// Thread safety: Driver::get() is safe from any thread (std::call_once); the returned table is immutable.

#include "cuda/driver_types.h"

#include <cstddef>
#include <cstdint>
#include <stdexcept>
#include <string>

namespace canopy::cuda {

// CUresult values as reported in errors; 0 is CUDA_SUCCESS.
using CuResult = int;

// The driver API version whose entry points canopy requests from cuGetProcAddress.
inline constexpr int API_VERSION = 12000;

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

// True for the errors after which the context is unusable (every later call fails the same way): a fault in a
// kernel (illegal address, illegal instruction, misaligned address, assert, launch failure ...), an
// uncorrectable ECC or NVLink error, a destroyed context, CUDA_ERROR_UNKNOWN. A process that sees one must
// drop its context; a chip worker exits so that its supervisor restarts it.
bool is_sticky(CuResult result) noexcept;

// The entry points canopy uses, with the prototypes of the API_VERSION they are requested for.
struct DriverApi {
    CuStatus (*cuInit)(unsigned int flags) = nullptr;
    CuStatus (*cuDriverGetVersion)(int* version) = nullptr;
    CuStatus (*cuGetErrorName)(CuStatus error, const char** name) = nullptr;
    CuStatus (*cuGetErrorString)(CuStatus error, const char** text) = nullptr;
    // devices and primary contexts
    CuStatus (*cuDeviceGetCount)(int* count) = nullptr;
    CuStatus (*cuDeviceGet)(CuDevice* device, int ordinal) = nullptr;
    CuStatus (*cuDeviceGetName)(char* name, int length, CuDevice device) = nullptr;
    CuStatus (*cuDeviceGetAttribute)(int* value, CuDeviceAttribute attribute, CuDevice device) = nullptr;
    CuStatus (*cuDevicePrimaryCtxRetain)(CuContext* context, CuDevice device) = nullptr;
    CuStatus (*cuDevicePrimaryCtxRelease)(CuDevice device) = nullptr;
    CuStatus (*cuCtxSetCurrent)(CuContext context) = nullptr;
    CuStatus (*cuCtxSynchronize)() = nullptr;
    // streams
    CuStatus (*cuStreamCreate)(CuStream* stream, unsigned int flags) = nullptr;
    CuStatus (*cuStreamSynchronize)(CuStream stream) = nullptr;
    CuStatus (*cuStreamDestroy)(CuStream stream) = nullptr;
    CuStatus (*cuStreamWaitEvent)(CuStream stream, CuEvent event, unsigned int flags) = nullptr;
    // events: completion of a chip's work, in stream order
    CuStatus (*cuEventCreate)(CuEvent* event, unsigned int flags) = nullptr;
    CuStatus (*cuEventRecord)(CuEvent event, CuStream stream) = nullptr;
    CuStatus (*cuEventQuery)(CuEvent event) = nullptr;
    CuStatus (*cuEventSynchronize)(CuEvent event) = nullptr;
    CuStatus (*cuEventDestroy)(CuEvent event) = nullptr;
    // modules and launches
    CuStatus (*cuModuleLoadData)(CuModule* module, const void* image) = nullptr;
    CuStatus (*cuModuleGetFunction)(CuFunction* function, CuModule module, const char* name) = nullptr;
    CuStatus (*cuModuleUnload)(CuModule module) = nullptr;
    CuStatus (*cuLaunchKernel)(CuFunction function, unsigned int grid_x, unsigned int grid_y, unsigned int grid_z,
                               unsigned int block_x, unsigned int block_y, unsigned int block_z,
                               unsigned int shared_bytes, CuStream stream, void** params, void** extra) = nullptr;
    // user modules: JIT with logs, kernel attributes
    CuStatus (*cuModuleLoadDataEx)(CuModule* module, const void* image, unsigned int count, CuJitOption* options,
                                   void** values) = nullptr;
    CuStatus (*cuFuncGetAttribute)(int* value, CuFunctionAttribute attribute, CuFunction function) = nullptr;
    CuStatus (*cuFuncSetAttribute)(CuFunction function, CuFunctionAttribute attribute, int value) = nullptr;
    // memory
    CuStatus (*cuMemAlloc)(CuDevicePtr* pointer, std::size_t bytes) = nullptr;
    CuStatus (*cuMemFree)(CuDevicePtr pointer) = nullptr;
    CuStatus (*cuMemcpyHtoD)(CuDevicePtr destination, const void* source, std::size_t bytes) = nullptr;
    CuStatus (*cuMemcpyDtoH)(void* destination, CuDevicePtr source, std::size_t bytes) = nullptr;
    CuStatus (*cuMemcpyHtoDAsync)(CuDevicePtr destination, const void* source, std::size_t bytes,
                                  CuStream stream) = nullptr;
    CuStatus (*cuMemcpyDtoHAsync)(void* destination, CuDevicePtr source, std::size_t bytes, CuStream stream) = nullptr;
    CuStatus (*cuMemHostRegister)(void* pointer, std::size_t bytes, unsigned int flags) = nullptr;
    CuStatus (*cuMemHostUnregister)(void* pointer) = nullptr;
    CuStatus (*cuMemHostGetDevicePointer)(CuDevicePtr* device_pointer, void* host_pointer,
                                          unsigned int flags) = nullptr;
    CuStatus (*cuMemAllocHost)(void** pointer, std::size_t bytes) = nullptr;
    CuStatus (*cuMemFreeHost)(void* pointer) = nullptr;
    CuStatus (*cuMemsetD8Async)(CuDevicePtr destination, unsigned char value, std::size_t count,
                                CuStream stream) = nullptr;
    CuStatus (*cuMemcpyAsync)(CuDevicePtr destination, CuDevicePtr source, std::size_t bytes,
                              CuStream stream) = nullptr;
    // virtual memory management: CUDA_VMM buffers shared between processes by file descriptor
    CuStatus (*cuDeviceCanAccessPeer)(int* can_access, CuDevice device, CuDevice peer) = nullptr;
    CuStatus (*cuMemGetAllocationGranularity)(std::size_t* granularity, const CuMemAllocationProp* prop,
                                              CuMemGranularityFlags option) = nullptr;
    CuStatus (*cuMemCreate)(CuMemHandle* handle, std::size_t bytes, const CuMemAllocationProp* prop,
                            unsigned long long flags) = nullptr;
    CuStatus (*cuMemRelease)(CuMemHandle handle) = nullptr;
    CuStatus (*cuMemExportToShareableHandle)(void* shareable, CuMemHandle handle, CuMemHandleType type,
                                             unsigned long long flags) = nullptr;
    CuStatus (*cuMemImportFromShareableHandle)(CuMemHandle* handle, void* os_handle, CuMemHandleType type) = nullptr;
    CuStatus (*cuMemGetAllocationPropertiesFromHandle)(CuMemAllocationProp* prop, CuMemHandle handle) = nullptr;
    CuStatus (*cuMemAddressReserve)(CuDevicePtr* pointer, std::size_t bytes, std::size_t alignment, CuDevicePtr address,
                                    unsigned long long flags) = nullptr;
    CuStatus (*cuMemAddressFree)(CuDevicePtr pointer, std::size_t bytes) = nullptr;
    CuStatus (*cuMemMap)(CuDevicePtr pointer, std::size_t bytes, std::size_t offset, CuMemHandle handle,
                         unsigned long long flags) = nullptr;
    CuStatus (*cuMemUnmap)(CuDevicePtr pointer, std::size_t bytes) = nullptr;
    CuStatus (*cuMemSetAccess)(CuDevicePtr pointer, std::size_t bytes, const CuMemAccessDesc* desc,
                               std::size_t count) = nullptr;
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

    // Turns a CUresult into CudaError naming `call`, and `detail` (what the call was about) when given;
    // does nothing for success.
    void check(CuResult result, const char* call, const std::string& detail = {}) const;
    // "CUDA_ERROR_ILLEGAL_ADDRESS"; "CUDA error N" for a value the driver cannot name.
    std::string error_name(CuResult result) const;

private:
    DriverApi api_{};
    int version_ = 0;
};

// Throws CudaError(call, result) when result is not CUDA_SUCCESS; the one place CUresults become errors.
// `call` is an entry point's base name ("cuMemAlloc"), which the error message carries.
#define CANOPY_CU(driver, call, ...) (driver).check((driver).api().call(__VA_ARGS__), #call)

} // namespace canopy::cuda
