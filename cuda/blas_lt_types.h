#pragma once
// cuBLASLt's handle, descriptor and value types, and the constants canopy passes to it.
//
// With the CUDA Toolkit at build time (CANOPY_HAVE_CUDA_TOOLKIT=1) these are the types of <cublasLt.h>, and
// blas_lt.cpp checks every entry point of BlasLtApi against the toolkit's prototype and every constant below
// against the toolkit's value. Without it they are layout-identical stand-ins (cuBLASLt's enums are ints, its
// opaque structs arrays of uint64), so canopy builds without the toolkit. Either way nothing links
// libcublasLt: it is opened with dlopen (blas_lt.h).
//
// Thread safety: types and constants only.

#include "cuda/driver_types.h"

#include <cstddef>
#include <cstdint>

#if CANOPY_HAVE_CUDA_TOOLKIT
#include <cublasLt.h>
#endif

namespace canopy::cuda {

#if CANOPY_HAVE_CUDA_TOOLKIT
using BlasStatus = cublasStatus_t;
using BlasComputeType = cublasComputeType_t;
using BlasDataType = cudaDataType_t;
using LtHandle = cublasLtHandle_t;
using LtMatmulDesc = cublasLtMatmulDesc_t;
using LtLayout = cublasLtMatrixLayout_t;
using LtPreference = cublasLtMatmulPreference_t;
using LtAlgo = cublasLtMatmulAlgo_t;
using LtHeuristicResult = cublasLtMatmulHeuristicResult_t;
using LtMatmulDescAttribute = cublasLtMatmulDescAttributes_t;
using LtPreferenceAttribute = cublasLtMatmulPreferenceAttributes_t;
using LtAlgoConfigAttribute = cublasLtMatmulAlgoConfigAttributes_t;
using LtAlgoCapAttribute = cublasLtMatmulAlgoCapAttributes_t;
using LtStream = cudaStream_t;
#else
using BlasStatus = int;
using BlasComputeType = int;
using BlasDataType = int;
using LtHandle = struct cublasLtContext*;
struct LtMatmulDescOpaque {
    std::uint64_t data[32];
};
struct LtLayoutOpaque {
    std::uint64_t data[8];
};
struct LtPreferenceOpaque {
    std::uint64_t data[8];
};
using LtMatmulDesc = LtMatmulDescOpaque*;
using LtLayout = LtLayoutOpaque*;
using LtPreference = LtPreferenceOpaque*;
struct LtAlgo {
    std::uint64_t data[8];
};
struct LtHeuristicResult {
    LtAlgo algo;
    std::size_t workspaceSize;
    BlasStatus state;
    float wavesCount;
    int reserved[4];
};
using LtMatmulDescAttribute = int;
using LtPreferenceAttribute = int;
using LtAlgoConfigAttribute = int;
using LtAlgoCapAttribute = int;
using LtStream = CuStream;
#endif

// cublasStatus_t values canopy tells apart (the rest are reported by name only).
inline constexpr int BLAS_STATUS_SUCCESS = 0;
inline constexpr int BLAS_STATUS_NOT_SUPPORTED = 15;

// cublasComputeType_t and cudaDataType_t.
inline constexpr int BLAS_COMPUTE_32F = 68;
inline constexpr int BLAS_COMPUTE_32F_FAST_TF32 = 77;
inline constexpr int BLAS_COMPUTE_64F = 70;
inline constexpr int BLAS_R_32F = 0;
inline constexpr int BLAS_R_64F = 1;
inline constexpr int BLAS_R_16F = 2;
inline constexpr int BLAS_R_16BF = 14;

// cublasOperation_t.
inline constexpr int BLAS_OP_N = 0;
inline constexpr int BLAS_OP_T = 1;

// cublasLtMatmulDescAttributes_t.
inline constexpr int LT_MATMUL_DESC_TRANSA = 3;
inline constexpr int LT_MATMUL_DESC_TRANSB = 4;

// cublasLtMatmulPreferenceAttributes_t.
inline constexpr int LT_PREF_MAX_WORKSPACE_BYTES = 1;   // uint64_t
inline constexpr int LT_PREF_REDUCTION_SCHEME_MASK = 3; // uint32_t
inline constexpr int LT_PREF_MIN_ALIGNMENT_A_BYTES = 5; // uint32_t; B, C, D follow
inline constexpr int LT_PREF_MIN_ALIGNMENT_B_BYTES = 6;
inline constexpr int LT_PREF_MIN_ALIGNMENT_C_BYTES = 7;
inline constexpr int LT_PREF_MIN_ALIGNMENT_D_BYTES = 8;
inline constexpr int LT_PREF_IMPL_MASK = 12; // uint64_t

// cublasLtMatmulAlgoConfigAttributes_t and cublasLtMatmulAlgoCapAttributes_t.
inline constexpr int LT_ALGO_CONFIG_ID = 0;                 // int32_t
inline constexpr int LT_ALGO_CONFIG_SPLITK_NUM = 2;         // int32_t
inline constexpr int LT_ALGO_CONFIG_REDUCTION_SCHEME = 3;   // uint32_t
inline constexpr int LT_ALGO_CAP_NUMERICAL_IMPL_FLAGS = 15; // uint64_t

// cublasLtReductionScheme_t.
inline constexpr std::uint32_t LT_REDUCTION_SCHEME_NONE = 0;
inline constexpr std::uint32_t LT_REDUCTION_SCHEME_INPLACE = 1;
inline constexpr std::uint32_t LT_REDUCTION_SCHEME_COMPUTE_TYPE = 2;
inline constexpr std::uint32_t LT_REDUCTION_SCHEME_OUTPUT_TYPE = 4;

// cublasLtNumericalImplFlags_t bits (CUBLASLT_NUMERICAL_IMPL_FLAGS_*).
inline constexpr std::uint64_t LT_IMPL_FLAGS_FMA = 0x01;
inline constexpr std::uint64_t LT_IMPL_FLAGS_TENSOR_OP_MASK = 0xfe;
inline constexpr std::uint64_t LT_IMPL_FLAGS_INPUT_TF32 = 0x04ull << 16;

} // namespace canopy::cuda
