#include "cuda/driver.h"

#include <algorithm>
#include <array>
#include <dlfcn.h>
#include <mutex>
#include <optional>
#include <type_traits>

namespace canopy::cuda {
namespace {

using GetProcAddress = CuStatus (*)(const char* symbol, void** pfn, int cuda_version, std::uint64_t flags, int* status);

template <class Fn>
void resolve(GetProcAddress get_proc, const char* symbol, Fn& out) {
    void* pfn = nullptr;
    int status = 0;
    const CuResult r = get_proc(symbol, &pfn, API_VERSION, 0, &status);
    if (r != 0 || pfn == nullptr) {
        throw CudaError("cuGetProcAddress", r == 0 ? DRIVER_NOT_LOADED : r,
                        std::string("driver has no entry point ") + symbol);
    }
    out = reinterpret_cast<Fn>(pfn);
}

// Resolves DriverApi::name by its base name; with <cuda.h> the member may carry a versioned spelling
// (cuMemAlloc_v2), the symbol asked for is the base name, which cuGetProcAddress maps to that version.
#define CANOPY_RESOLVE(get_proc, api, name) resolve(get_proc, #name, (api).name)

void resolve_all(GetProcAddress get_proc, DriverApi& api) {
    CANOPY_RESOLVE(get_proc, api, cuInit);
    CANOPY_RESOLVE(get_proc, api, cuDriverGetVersion);
    CANOPY_RESOLVE(get_proc, api, cuGetErrorName);
    CANOPY_RESOLVE(get_proc, api, cuGetErrorString);
    CANOPY_RESOLVE(get_proc, api, cuDeviceGetCount);
    CANOPY_RESOLVE(get_proc, api, cuDeviceGet);
    CANOPY_RESOLVE(get_proc, api, cuDeviceGetName);
    CANOPY_RESOLVE(get_proc, api, cuDeviceGetAttribute);
    CANOPY_RESOLVE(get_proc, api, cuDevicePrimaryCtxRetain);
    CANOPY_RESOLVE(get_proc, api, cuDevicePrimaryCtxRelease);
    CANOPY_RESOLVE(get_proc, api, cuCtxSetCurrent);
    CANOPY_RESOLVE(get_proc, api, cuCtxSynchronize);
    CANOPY_RESOLVE(get_proc, api, cuStreamCreate);
    CANOPY_RESOLVE(get_proc, api, cuStreamSynchronize);
    CANOPY_RESOLVE(get_proc, api, cuStreamDestroy);
    CANOPY_RESOLVE(get_proc, api, cuStreamWaitEvent);
    CANOPY_RESOLVE(get_proc, api, cuEventCreate);
    CANOPY_RESOLVE(get_proc, api, cuEventRecord);
    CANOPY_RESOLVE(get_proc, api, cuEventQuery);
    CANOPY_RESOLVE(get_proc, api, cuEventSynchronize);
    CANOPY_RESOLVE(get_proc, api, cuEventDestroy);
    CANOPY_RESOLVE(get_proc, api, cuModuleLoadData);
    CANOPY_RESOLVE(get_proc, api, cuModuleGetFunction);
    CANOPY_RESOLVE(get_proc, api, cuModuleUnload);
    CANOPY_RESOLVE(get_proc, api, cuLaunchKernel);
    CANOPY_RESOLVE(get_proc, api, cuModuleLoadDataEx);
    CANOPY_RESOLVE(get_proc, api, cuFuncGetAttribute);
    CANOPY_RESOLVE(get_proc, api, cuFuncSetAttribute);
    CANOPY_RESOLVE(get_proc, api, cuMemAlloc);
    CANOPY_RESOLVE(get_proc, api, cuMemFree);
    CANOPY_RESOLVE(get_proc, api, cuMemcpyHtoD);
    CANOPY_RESOLVE(get_proc, api, cuMemcpyDtoH);
    CANOPY_RESOLVE(get_proc, api, cuMemcpyHtoDAsync);
    CANOPY_RESOLVE(get_proc, api, cuMemcpyDtoHAsync);
    CANOPY_RESOLVE(get_proc, api, cuMemHostRegister);
    CANOPY_RESOLVE(get_proc, api, cuMemHostUnregister);
    CANOPY_RESOLVE(get_proc, api, cuMemHostGetDevicePointer);
    CANOPY_RESOLVE(get_proc, api, cuMemAllocHost);
    CANOPY_RESOLVE(get_proc, api, cuMemFreeHost);
    CANOPY_RESOLVE(get_proc, api, cuMemsetD8Async);
    CANOPY_RESOLVE(get_proc, api, cuMemcpyAsync);
    CANOPY_RESOLVE(get_proc, api, cuDeviceCanAccessPeer);
    CANOPY_RESOLVE(get_proc, api, cuMemGetAllocationGranularity);
    CANOPY_RESOLVE(get_proc, api, cuMemCreate);
    CANOPY_RESOLVE(get_proc, api, cuMemRelease);
    CANOPY_RESOLVE(get_proc, api, cuMemExportToShareableHandle);
    CANOPY_RESOLVE(get_proc, api, cuMemImportFromShareableHandle);
    CANOPY_RESOLVE(get_proc, api, cuMemGetAllocationPropertiesFromHandle);
    CANOPY_RESOLVE(get_proc, api, cuMemAddressReserve);
    CANOPY_RESOLVE(get_proc, api, cuMemAddressFree);
    CANOPY_RESOLVE(get_proc, api, cuMemMap);
    CANOPY_RESOLVE(get_proc, api, cuMemUnmap);
    CANOPY_RESOLVE(get_proc, api, cuMemSetAccess);
}

#if CANOPY_HAVE_CUDA_TOOLKIT
// Every entry point has exactly the toolkit's prototype, and every constant its value.
#define CANOPY_SAME_PROTOTYPE(name)                                                                                    \
    static_assert(std::is_same_v<decltype(DriverApi::name), decltype(&::name)>, #name " prototype differs from "       \
                                                                                      "cuda.h")
CANOPY_SAME_PROTOTYPE(cuInit);
CANOPY_SAME_PROTOTYPE(cuDriverGetVersion);
CANOPY_SAME_PROTOTYPE(cuGetErrorName);
CANOPY_SAME_PROTOTYPE(cuGetErrorString);
CANOPY_SAME_PROTOTYPE(cuDeviceGetCount);
CANOPY_SAME_PROTOTYPE(cuDeviceGet);
CANOPY_SAME_PROTOTYPE(cuDeviceGetName);
CANOPY_SAME_PROTOTYPE(cuDeviceGetAttribute);
CANOPY_SAME_PROTOTYPE(cuDevicePrimaryCtxRetain);
CANOPY_SAME_PROTOTYPE(cuDevicePrimaryCtxRelease);
CANOPY_SAME_PROTOTYPE(cuCtxSetCurrent);
CANOPY_SAME_PROTOTYPE(cuCtxSynchronize);
CANOPY_SAME_PROTOTYPE(cuStreamCreate);
CANOPY_SAME_PROTOTYPE(cuStreamSynchronize);
CANOPY_SAME_PROTOTYPE(cuStreamDestroy);
CANOPY_SAME_PROTOTYPE(cuStreamWaitEvent);
CANOPY_SAME_PROTOTYPE(cuEventCreate);
CANOPY_SAME_PROTOTYPE(cuEventRecord);
CANOPY_SAME_PROTOTYPE(cuEventQuery);
CANOPY_SAME_PROTOTYPE(cuEventSynchronize);
CANOPY_SAME_PROTOTYPE(cuEventDestroy);
CANOPY_SAME_PROTOTYPE(cuModuleLoadData);
CANOPY_SAME_PROTOTYPE(cuModuleGetFunction);
CANOPY_SAME_PROTOTYPE(cuModuleUnload);
CANOPY_SAME_PROTOTYPE(cuLaunchKernel);
CANOPY_SAME_PROTOTYPE(cuModuleLoadDataEx);
CANOPY_SAME_PROTOTYPE(cuFuncGetAttribute);
CANOPY_SAME_PROTOTYPE(cuFuncSetAttribute);
CANOPY_SAME_PROTOTYPE(cuMemAlloc);
CANOPY_SAME_PROTOTYPE(cuMemFree);
CANOPY_SAME_PROTOTYPE(cuMemcpyHtoD);
CANOPY_SAME_PROTOTYPE(cuMemcpyDtoH);
CANOPY_SAME_PROTOTYPE(cuMemcpyHtoDAsync);
CANOPY_SAME_PROTOTYPE(cuMemcpyDtoHAsync);
CANOPY_SAME_PROTOTYPE(cuMemHostRegister);
CANOPY_SAME_PROTOTYPE(cuMemHostUnregister);
CANOPY_SAME_PROTOTYPE(cuMemHostGetDevicePointer);
CANOPY_SAME_PROTOTYPE(cuMemAllocHost);
CANOPY_SAME_PROTOTYPE(cuMemFreeHost);
CANOPY_SAME_PROTOTYPE(cuMemsetD8Async);
CANOPY_SAME_PROTOTYPE(cuMemcpyAsync);
CANOPY_SAME_PROTOTYPE(cuDeviceCanAccessPeer);
CANOPY_SAME_PROTOTYPE(cuMemGetAllocationGranularity);
CANOPY_SAME_PROTOTYPE(cuMemCreate);
CANOPY_SAME_PROTOTYPE(cuMemRelease);
CANOPY_SAME_PROTOTYPE(cuMemExportToShareableHandle);
CANOPY_SAME_PROTOTYPE(cuMemImportFromShareableHandle);
CANOPY_SAME_PROTOTYPE(cuMemGetAllocationPropertiesFromHandle);
CANOPY_SAME_PROTOTYPE(cuMemAddressReserve);
CANOPY_SAME_PROTOTYPE(cuMemAddressFree);
CANOPY_SAME_PROTOTYPE(cuMemMap);
CANOPY_SAME_PROTOTYPE(cuMemUnmap);
CANOPY_SAME_PROTOTYPE(cuMemSetAccess);
#undef CANOPY_SAME_PROTOTYPE

static_assert(STREAM_NON_BLOCKING == CU_STREAM_NON_BLOCKING);
static_assert(EVENT_BLOCKING_SYNC == CU_EVENT_BLOCKING_SYNC);
static_assert(EVENT_DISABLE_TIMING == CU_EVENT_DISABLE_TIMING);
static_assert(ERROR_NOT_READY == CUDA_ERROR_NOT_READY);
static_assert(HOST_REGISTER_DEVICEMAP == CU_MEMHOSTREGISTER_DEVICEMAP);
static_assert(HOST_REGISTER_READ_ONLY == CU_MEMHOSTREGISTER_READ_ONLY);
static_assert(ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR);
static_assert(ATTRIBUTE_COMPUTE_CAPABILITY_MINOR == CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR);
static_assert(ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED == CU_DEVICE_ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED);
static_assert(ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN == CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
static_assert(JIT_INFO_LOG_BUFFER == CU_JIT_INFO_LOG_BUFFER);
static_assert(JIT_INFO_LOG_BUFFER_SIZE_BYTES == CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES);
static_assert(JIT_ERROR_LOG_BUFFER == CU_JIT_ERROR_LOG_BUFFER);
static_assert(JIT_ERROR_LOG_BUFFER_SIZE_BYTES == CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES);
static_assert(FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK == CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK);
static_assert(FUNC_ATTRIBUTE_SHARED_SIZE_BYTES == CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES);
static_assert(FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES == CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES);
static_assert(ERROR_NOT_FOUND == CUDA_ERROR_NOT_FOUND);
static_assert(MEM_ALLOCATION_TYPE_PINNED == CU_MEM_ALLOCATION_TYPE_PINNED);
static_assert(MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR == CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
static_assert(MEM_LOCATION_TYPE_DEVICE == CU_MEM_LOCATION_TYPE_DEVICE);
static_assert(MEM_ACCESS_FLAGS_PROT_READ == CU_MEM_ACCESS_FLAGS_PROT_READ);
static_assert(MEM_ACCESS_FLAGS_PROT_READWRITE == CU_MEM_ACCESS_FLAGS_PROT_READWRITE);
static_assert(MEM_ALLOC_GRANULARITY_RECOMMENDED == CU_MEM_ALLOC_GRANULARITY_RECOMMENDED);
static_assert(ERROR_INVALID_VALUE == CUDA_ERROR_INVALID_VALUE);
static_assert(ERROR_NOT_SUPPORTED == CUDA_ERROR_NOT_SUPPORTED);
static_assert(ERROR_NO_DEVICE == CUDA_ERROR_NO_DEVICE);
static_assert(ERROR_ECC_UNCORRECTABLE == CUDA_ERROR_ECC_UNCORRECTABLE);
static_assert(ERROR_NVLINK_UNCORRECTABLE == CUDA_ERROR_NVLINK_UNCORRECTABLE);
static_assert(ERROR_CONTAINED == CUDA_ERROR_CONTAINED);
static_assert(ERROR_ILLEGAL_ADDRESS == CUDA_ERROR_ILLEGAL_ADDRESS);
static_assert(ERROR_LAUNCH_TIMEOUT == CUDA_ERROR_LAUNCH_TIMEOUT);
static_assert(ERROR_CONTEXT_IS_DESTROYED == CUDA_ERROR_CONTEXT_IS_DESTROYED);
static_assert(ERROR_ASSERT == CUDA_ERROR_ASSERT);
static_assert(ERROR_HARDWARE_STACK_ERROR == CUDA_ERROR_HARDWARE_STACK_ERROR);
static_assert(ERROR_ILLEGAL_INSTRUCTION == CUDA_ERROR_ILLEGAL_INSTRUCTION);
static_assert(ERROR_MISALIGNED_ADDRESS == CUDA_ERROR_MISALIGNED_ADDRESS);
static_assert(ERROR_INVALID_ADDRESS_SPACE == CUDA_ERROR_INVALID_ADDRESS_SPACE);
static_assert(ERROR_INVALID_PC == CUDA_ERROR_INVALID_PC);
static_assert(ERROR_LAUNCH_FAILED == CUDA_ERROR_LAUNCH_FAILED);
static_assert(ERROR_EXTERNAL_DEVICE == CUDA_ERROR_EXTERNAL_DEVICE);
static_assert(ERROR_UNKNOWN == CUDA_ERROR_UNKNOWN);
#endif

// Errors after which the context is corrupt; see is_sticky().
constexpr std::array<CuResult, 15> STICKY_ERRORS{
    ERROR_ECC_UNCORRECTABLE,
    ERROR_NVLINK_UNCORRECTABLE,
    ERROR_CONTAINED,
    ERROR_ILLEGAL_ADDRESS,
    ERROR_LAUNCH_TIMEOUT,
    ERROR_CONTEXT_IS_DESTROYED,
    ERROR_ASSERT,
    ERROR_HARDWARE_STACK_ERROR,
    ERROR_ILLEGAL_INSTRUCTION,
    ERROR_MISALIGNED_ADDRESS,
    ERROR_INVALID_ADDRESS_SPACE,
    ERROR_INVALID_PC,
    ERROR_LAUNCH_FAILED,
    ERROR_EXTERNAL_DEVICE,
    ERROR_UNKNOWN,
};

} // namespace

CudaError::CudaError(std::string call, CuResult result, const std::string& message)
    : std::runtime_error(call + ": " + message), call_(std::move(call)), result_(result) {}

bool is_sticky(CuResult result) noexcept {
    return std::find(STICKY_ERRORS.begin(), STICKY_ERRORS.end(), result) != STICKY_ERRORS.end();
}

Driver Driver::load(const std::string& library) {
    // The handle stays open for the life of the process: entry points must outlive every caller.
    void* handle = ::dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (handle == nullptr) {
        const char* why = ::dlerror();
        throw CudaError("dlopen", DRIVER_NOT_LOADED,
                        "cannot load the CUDA driver " + library + " (" + (why ? why : "unknown error") +
                            "); is the NVIDIA driver installed?");
    }
    void* sym = ::dlsym(handle, "cuGetProcAddress_v2");
    if (sym == nullptr) {
        throw CudaError("dlsym", DRIVER_NOT_LOADED, library + " has no cuGetProcAddress_v2; the driver is too old");
    }
    Driver d;
    resolve_all(reinterpret_cast<GetProcAddress>(sym), d.api_);
    CANOPY_CU(d, cuDriverGetVersion, &d.version_);
    return d;
}

const Driver& Driver::get() {
    static std::once_flag once;
    static std::optional<Driver> driver;
    static std::optional<CudaError> failure;
    std::call_once(once, [] {
        try {
            Driver d = load("libcuda.so.1");
            CANOPY_CU(d, cuInit, 0);
            driver = std::move(d);
        } catch (const CudaError& e) {
            failure = e;
        }
    });
    if (failure) {
        throw *failure;
    }
    return *driver;
}

void Driver::check(CuResult result, const char* call, const std::string& detail) const {
    if (result == 0) {
        return;
    }
    const char* text = nullptr;
    if (result < 0 || api_.cuGetErrorString == nullptr ||
        api_.cuGetErrorString(static_cast<CuStatus>(result), &text) != 0 || text == nullptr) {
        text = "no description";
    }
    throw CudaError(call, result,
                    error_name(result) + " (" + text + ")" + (detail.empty() ? std::string() : " for " + detail));
}

std::string Driver::error_name(CuResult result) const {
    const char* name = nullptr;
    if (result < 0 || api_.cuGetErrorName == nullptr ||
        api_.cuGetErrorName(static_cast<CuStatus>(result), &name) != 0 || name == nullptr) {
        return "CUDA error " + std::to_string(result);
    }
    return name;
}

} // namespace canopy::cuda
