#include "cuda/blas_lt.h"

#include <cstdlib>
#include <dlfcn.h>
#include <type_traits>

namespace canopy::cuda {
namespace {

static_assert(std::is_same_v<LtStream, CuStream>, "cuBLASLt takes the driver's streams as they are");

// Resolves one entry point; false (and `why` set) when the library lacks it.
template <class Fn>
bool resolve(void* handle, const char* symbol, Fn& out, std::string& why) {
    void* pfn = ::dlsym(handle, symbol);
    if (pfn == nullptr) {
        why = std::string("no entry point ") + symbol;
        return false;
    }
    out = reinterpret_cast<Fn>(pfn);
    return true;
}

#define CANOPY_LT_RESOLVE(handle, api, name, why)                                                                      \
    if (!resolve(handle, #name, (api).name, why)) {                                                                    \
        return false;                                                                                                  \
    }

bool resolve_all(void* handle, BlasLtApi& api, std::string& why) {
    CANOPY_LT_RESOLVE(handle, api, cublasLtGetVersion, why);
    CANOPY_LT_RESOLVE(handle, api, cublasLtGetStatusName, why);
    CANOPY_LT_RESOLVE(handle, api, cublasLtGetStatusString, why);
    CANOPY_LT_RESOLVE(handle, api, cublasLtCreate, why);
    CANOPY_LT_RESOLVE(handle, api, cublasLtDestroy, why);
    CANOPY_LT_RESOLVE(handle, api, cublasLtMatmulDescCreate, why);
    CANOPY_LT_RESOLVE(handle, api, cublasLtMatmulDescDestroy, why);
    CANOPY_LT_RESOLVE(handle, api, cublasLtMatmulDescSetAttribute, why);
    CANOPY_LT_RESOLVE(handle, api, cublasLtMatrixLayoutCreate, why);
    CANOPY_LT_RESOLVE(handle, api, cublasLtMatrixLayoutDestroy, why);
    CANOPY_LT_RESOLVE(handle, api, cublasLtMatmulPreferenceCreate, why);
    CANOPY_LT_RESOLVE(handle, api, cublasLtMatmulPreferenceDestroy, why);
    CANOPY_LT_RESOLVE(handle, api, cublasLtMatmulPreferenceSetAttribute, why);
    CANOPY_LT_RESOLVE(handle, api, cublasLtMatmulAlgoGetHeuristic, why);
    CANOPY_LT_RESOLVE(handle, api, cublasLtMatmulAlgoConfigGetAttribute, why);
    CANOPY_LT_RESOLVE(handle, api, cublasLtMatmulAlgoCapGetAttribute, why);
    CANOPY_LT_RESOLVE(handle, api, cublasLtMatmul, why);
    return true;
}

#if CANOPY_HAVE_CUDA_TOOLKIT
// Every entry point has exactly the toolkit's prototype, and every constant its value.
#define CANOPY_SAME_PROTOTYPE(name)                                                                                    \
    static_assert(std::is_same_v<decltype(BlasLtApi::name), decltype(&::name)>, #name " prototype differs from "       \
                                                                                      "cublasLt.h")
CANOPY_SAME_PROTOTYPE(cublasLtGetVersion);
CANOPY_SAME_PROTOTYPE(cublasLtGetStatusName);
CANOPY_SAME_PROTOTYPE(cublasLtGetStatusString);
CANOPY_SAME_PROTOTYPE(cublasLtCreate);
CANOPY_SAME_PROTOTYPE(cublasLtDestroy);
CANOPY_SAME_PROTOTYPE(cublasLtMatmulDescCreate);
CANOPY_SAME_PROTOTYPE(cublasLtMatmulDescDestroy);
CANOPY_SAME_PROTOTYPE(cublasLtMatmulDescSetAttribute);
CANOPY_SAME_PROTOTYPE(cublasLtMatrixLayoutCreate);
CANOPY_SAME_PROTOTYPE(cublasLtMatrixLayoutDestroy);
CANOPY_SAME_PROTOTYPE(cublasLtMatmulPreferenceCreate);
CANOPY_SAME_PROTOTYPE(cublasLtMatmulPreferenceDestroy);
CANOPY_SAME_PROTOTYPE(cublasLtMatmulPreferenceSetAttribute);
CANOPY_SAME_PROTOTYPE(cublasLtMatmulAlgoGetHeuristic);
CANOPY_SAME_PROTOTYPE(cublasLtMatmulAlgoConfigGetAttribute);
CANOPY_SAME_PROTOTYPE(cublasLtMatmulAlgoCapGetAttribute);
CANOPY_SAME_PROTOTYPE(cublasLtMatmul);
#undef CANOPY_SAME_PROTOTYPE

static_assert(BLAS_STATUS_SUCCESS == CUBLAS_STATUS_SUCCESS);
static_assert(BLAS_STATUS_NOT_SUPPORTED == CUBLAS_STATUS_NOT_SUPPORTED);
static_assert(BLAS_COMPUTE_32F == CUBLAS_COMPUTE_32F);
static_assert(BLAS_COMPUTE_32F_FAST_TF32 == CUBLAS_COMPUTE_32F_FAST_TF32);
static_assert(BLAS_COMPUTE_64F == CUBLAS_COMPUTE_64F);
static_assert(BLAS_R_32F == CUDA_R_32F);
static_assert(BLAS_R_64F == CUDA_R_64F);
static_assert(BLAS_R_16F == CUDA_R_16F);
static_assert(BLAS_R_16BF == CUDA_R_16BF);
static_assert(BLAS_OP_N == CUBLAS_OP_N);
static_assert(BLAS_OP_T == CUBLAS_OP_T);
static_assert(LT_MATMUL_DESC_TRANSA == CUBLASLT_MATMUL_DESC_TRANSA);
static_assert(LT_MATMUL_DESC_TRANSB == CUBLASLT_MATMUL_DESC_TRANSB);
static_assert(LT_PREF_MAX_WORKSPACE_BYTES == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES);
static_assert(LT_PREF_REDUCTION_SCHEME_MASK == CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK);
static_assert(LT_PREF_MIN_ALIGNMENT_A_BYTES == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES);
static_assert(LT_PREF_MIN_ALIGNMENT_B_BYTES == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES);
static_assert(LT_PREF_MIN_ALIGNMENT_C_BYTES == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES);
static_assert(LT_PREF_MIN_ALIGNMENT_D_BYTES == CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES);
static_assert(LT_PREF_IMPL_MASK == CUBLASLT_MATMUL_PREF_IMPL_MASK);
static_assert(LT_ALGO_CONFIG_ID == CUBLASLT_ALGO_CONFIG_ID);
static_assert(LT_ALGO_CONFIG_SPLITK_NUM == CUBLASLT_ALGO_CONFIG_SPLITK_NUM);
static_assert(LT_ALGO_CONFIG_REDUCTION_SCHEME == CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME);
static_assert(LT_ALGO_CAP_NUMERICAL_IMPL_FLAGS == CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS);
static_assert(LT_REDUCTION_SCHEME_NONE == CUBLASLT_REDUCTION_SCHEME_NONE);
static_assert(LT_REDUCTION_SCHEME_INPLACE == CUBLASLT_REDUCTION_SCHEME_INPLACE);
static_assert(LT_REDUCTION_SCHEME_COMPUTE_TYPE == CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE);
static_assert(LT_REDUCTION_SCHEME_OUTPUT_TYPE == CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE);
static_assert(LT_IMPL_FLAGS_FMA == CUBLASLT_NUMERICAL_IMPL_FLAGS_FMA);
static_assert(LT_IMPL_FLAGS_TENSOR_OP_MASK == CUBLASLT_NUMERICAL_IMPL_FLAGS_TENSOR_OP_MASK);
static_assert(LT_IMPL_FLAGS_INPUT_TF32 == CUBLASLT_NUMERICAL_IMPL_FLAGS_INPUT_TF32);
#else
static_assert(sizeof(LtHeuristicResult) == 96, "cublasLtMatmulHeuristicResult_t is 96 bytes");
#endif

} // namespace

std::vector<std::string> BlasLt::candidates() {
    if (const char* named = std::getenv("CANOPY_CUBLASLT"); named != nullptr) {
        return {named};
    }
    return {"libcublasLt.so.13", "libcublasLt.so.12"};
}

BlasLt BlasLt::load(const std::vector<std::string>& names) {
    std::string tried;
    for (const std::string& name : names) {
        std::string why;
        // The handle stays open for the life of the process: entry points must outlive every caller.
        void* handle = ::dlopen(name.c_str(), RTLD_NOW | RTLD_LOCAL);
        BlasLt lt;
        if (handle == nullptr) {
            const char* error = ::dlerror();
            why = error != nullptr ? error : "unknown error";
        } else if (resolve_all(handle, lt.api_, why)) {
            lt.version_ = lt.api_.cublasLtGetVersion();
            lt.library_ = name;
            if (lt.version_ / 10000 >= MIN_MAJOR_VERSION) {
                return lt;
            }
            why = "version " + std::to_string(lt.version_) + " is older than cuBLASLt " +
                  std::to_string(MIN_MAJOR_VERSION);
        }
        tried += (tried.empty() ? "" : "; ") + name + ": " + why;
    }
    throw CudaError("dlopen", DRIVER_NOT_LOADED,
                    "cannot load cuBLASLt (" + (tried.empty() ? std::string("no library named") : tried) + ")");
}

void BlasLt::check(BlasStatus status, const char* call) const {
    if (static_cast<int>(status) == BLAS_STATUS_SUCCESS) {
        return;
    }
    const char* text = api_.cublasLtGetStatusString != nullptr ? api_.cublasLtGetStatusString(status) : nullptr;
    throw CudaError(call, BLAS_ERROR, status_name(status) + " (" + (text != nullptr ? text : "no description") + ")");
}

std::string BlasLt::status_name(BlasStatus status) const {
    const char* name = api_.cublasLtGetStatusName != nullptr ? api_.cublasLtGetStatusName(status) : nullptr;
    return name != nullptr ? std::string(name) : "cuBLAS status " + std::to_string(static_cast<int>(status));
}

} // namespace canopy::cuda
