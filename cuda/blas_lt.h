#pragma once
// cuBLASLt, loaded at run time with dlopen like the driver (cuda/driver.h): no canopy binary links
// libcublasLt, and a machine without it still runs every kernel (matmul falls back to canopy's own kernel).
//
// BlasLt::load() tries, in order, the library named by the environment variable CANOPY_CUBLASLT (a path or a
// soname; when it is set, nothing else is tried), then the sonames the CUDA toolkits ship: libcublasLt.so.13,
// libcublasLt.so.12. It resolves every entry point of BlasLtApi by name (dlsym) and refuses a library older
// than cuBLASLt 12 (BlasLt::MIN_VERSION). cuBLASLt brings its own CUDA runtime; it runs in the context current
// on the calling thread (a chip's primary context) and takes the driver's streams as they are.
//
// Every failed call becomes a CudaError through CANOPY_LT, whose message names the call and the cuBLAS status
// ("cublasLtMatmul: CUBLAS_STATUS_EXECUTION_FAILED (an absent device architectural feature ...)"); its
// result() is BLAS_ERROR, since no CUresult applies.
//
// Ownership: a loaded BlasLt keeps its library open for the life of the process (entry points must outlive
// every caller). Thread safety: the table is immutable after load(); cuBLASLt's own rules apply to its calls.

#include "cuda/blas_lt_types.h"
#include "cuda/driver.h"

#include <string>
#include <vector>

namespace canopy::cuda {

// CudaError::result() of a failed cuBLASLt call: no CUresult applies; the message names the cuBLAS status.
inline constexpr CuResult BLAS_ERROR = -2;

// The entry points canopy uses, with cuBLASLt's prototypes.
struct BlasLtApi {
    std::size_t (*cublasLtGetVersion)() = nullptr;
    const char* (*cublasLtGetStatusName)(BlasStatus status) = nullptr;
    const char* (*cublasLtGetStatusString)(BlasStatus status) = nullptr;
    BlasStatus (*cublasLtCreate)(LtHandle* handle) = nullptr;
    BlasStatus (*cublasLtDestroy)(LtHandle handle) = nullptr;
    BlasStatus (*cublasLtMatmulDescCreate)(LtMatmulDesc* desc, BlasComputeType compute, BlasDataType scale) = nullptr;
    BlasStatus (*cublasLtMatmulDescDestroy)(LtMatmulDesc desc) = nullptr;
    BlasStatus (*cublasLtMatmulDescSetAttribute)(LtMatmulDesc desc, LtMatmulDescAttribute attribute, const void* value,
                                                 std::size_t bytes) = nullptr;
    BlasStatus (*cublasLtMatrixLayoutCreate)(LtLayout* layout, BlasDataType type, std::uint64_t rows,
                                             std::uint64_t cols, std::int64_t ld) = nullptr;
    BlasStatus (*cublasLtMatrixLayoutDestroy)(LtLayout layout) = nullptr;
    BlasStatus (*cublasLtMatmulPreferenceCreate)(LtPreference* preference) = nullptr;
    BlasStatus (*cublasLtMatmulPreferenceDestroy)(LtPreference preference) = nullptr;
    BlasStatus (*cublasLtMatmulPreferenceSetAttribute)(LtPreference preference, LtPreferenceAttribute attribute,
                                                       const void* value, std::size_t bytes) = nullptr;
    BlasStatus (*cublasLtMatmulAlgoGetHeuristic)(LtHandle handle, LtMatmulDesc desc, LtLayout a, LtLayout b, LtLayout c,
                                                 LtLayout d, LtPreference preference, int requested,
                                                 LtHeuristicResult results[], int* returned) = nullptr;
    BlasStatus (*cublasLtMatmulAlgoConfigGetAttribute)(const LtAlgo* algo, LtAlgoConfigAttribute attribute, void* value,
                                                       std::size_t bytes, std::size_t* written) = nullptr;
    BlasStatus (*cublasLtMatmulAlgoCapGetAttribute)(const LtAlgo* algo, LtAlgoCapAttribute attribute, void* value,
                                                    std::size_t bytes, std::size_t* written) = nullptr;
    BlasStatus (*cublasLtMatmul)(LtHandle handle, LtMatmulDesc desc, const void* alpha, const void* a, LtLayout a_desc,
                                 const void* b, LtLayout b_desc, const void* beta, const void* c, LtLayout c_desc,
                                 void* d, LtLayout d_desc, const LtAlgo* algo, void* workspace,
                                 std::size_t workspace_bytes, LtStream stream) = nullptr;
};

class BlasLt {
public:
    // The oldest cuBLASLt whose enum values and prototypes match BlasLtApi (cublasLtGetVersion() / 10000).
    static constexpr std::size_t MIN_MAJOR_VERSION = 12;

    // The names load() tries: $CANOPY_CUBLASLT alone when it is set, else libcublasLt.so.13, libcublasLt.so.12.
    static std::vector<std::string> candidates();

    // Opens the first of `names` that dlopen loads and that has every entry point and a recent enough version.
    // Throws CudaError(call "dlopen", DRIVER_NOT_LOADED) naming each name tried and why it failed.
    static BlasLt load(const std::vector<std::string>& names = candidates());

    const BlasLtApi& api() const noexcept { return api_; }
    // cublasLtGetVersion(): major * 10000 + minor * 100 + patch.
    std::size_t version() const noexcept { return version_; }
    // The name it was loaded by.
    const std::string& library() const noexcept { return library_; }

    // Turns a cublasStatus_t into CudaError(call, BLAS_ERROR) naming the status; does nothing for success.
    void check(BlasStatus status, const char* call) const;
    // "CUBLAS_STATUS_NOT_SUPPORTED"; "cuBLAS status N" for a value the library cannot name.
    std::string status_name(BlasStatus status) const;

private:
    BlasLtApi api_{};
    std::size_t version_ = 0;
    std::string library_;
};

// Throws CudaError when `status` is not CUBLAS_STATUS_SUCCESS; the one place cuBLAS statuses become errors.
#define CANOPY_LT(lt, call, ...) (lt).check((lt).api().call(__VA_ARGS__), #call)

} // namespace canopy::cuda
