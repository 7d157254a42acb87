#include "cuda/driver.h"

#include <dlfcn.h>

#include <mutex>
#include <optional>

namespace canopy::cuda {
namespace {

// The driver API version the entry points are requested for (CUDA 12.0 semantics; cuGetProcAddress
// returns the matching versioned symbol, e.g. cuMemCreate or cuCtxCreate_v4).
constexpr int API_VERSION = 12000;

using GetProcAddress = CuResult (*)(const char* symbol, void** pfn, int cuda_version, std::uint64_t flags,
                                    int* status);

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

} // namespace

CudaError::CudaError(std::string call, CuResult result, const std::string& message)
    : std::runtime_error(call + ": " + message), call_(std::move(call)), result_(result) {}

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
    const auto get_proc = reinterpret_cast<GetProcAddress>(sym);
    Driver d;
    resolve(get_proc, "cuInit", d.api_.cuInit);
    resolve(get_proc, "cuDriverGetVersion", d.api_.cuDriverGetVersion);
    resolve(get_proc, "cuDeviceGetCount", d.api_.cuDeviceGetCount);
    resolve(get_proc, "cuDeviceGet", d.api_.cuDeviceGet);
    resolve(get_proc, "cuGetErrorName", d.api_.cuGetErrorName);
    resolve(get_proc, "cuGetErrorString", d.api_.cuGetErrorString);
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

void Driver::check(CuResult result, const char* call) const {
    if (result == 0) {
        return;
    }
    const char* text = nullptr;
    if (api_.cuGetErrorString == nullptr || api_.cuGetErrorString(result, &text) != 0 || text == nullptr) {
        text = "no description";
    }
    throw CudaError(call, result, error_name(result) + " (" + text + ")");
}

std::string Driver::error_name(CuResult result) const {
    const char* name = nullptr;
    if (api_.cuGetErrorName == nullptr || api_.cuGetErrorName(result, &name) != 0 || name == nullptr) {
        return "CUDA error " + std::to_string(result);
    }
    return name;
}

} // namespace canopy::cuda
