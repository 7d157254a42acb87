#include "worker/cuda/lt_matmul.h"

#include "protocol/builtin_launch.h"

#include <cstdio>
#include <type_traits>

namespace canopy::worker {

// Owns one cuBLASLt object; destroyed through the loaded library's own destroy function. Outside the anonymous
// namespace because LtMatmul's members, which have external linkage, hold them.
template <class T>
struct LtDeleter {
    cuda::BlasStatus (*destroy)(T) = nullptr;
    void operator()(T object) const noexcept {
        if (destroy != nullptr) {
            (void)destroy(object);
        }
    }
};
template <class T>
using LtOwned = std::unique_ptr<std::remove_pointer_t<T>, LtDeleter<T>>;

namespace {

cuda::BlasDataType data_type(DataType dtype) noexcept {
    switch (dtype) {
    case DataType::FLOAT64:
        return static_cast<cuda::BlasDataType>(cuda::BLAS_R_64F);
    case DataType::FLOAT16:
        return static_cast<cuda::BlasDataType>(cuda::BLAS_R_16F);
    case DataType::BFLOAT16:
        return static_cast<cuda::BlasDataType>(cuda::BLAS_R_16BF);
    default:
        return static_cast<cuda::BlasDataType>(cuda::BLAS_R_32F);
    }
}

const void* device_pointer(std::uint64_t address) noexcept {
    return reinterpret_cast<const void*>(static_cast<std::uintptr_t>(address));
}

// The split-K reduction schemes admitted: reduced in a separate step (independent of timing, unlike INPLACE) with
// the partial sums kept in the accumulator's type. OUTPUT_TYPE keeps them in the output's type, which for float16
// and bfloat16 would round every partial sum to 16 bits; it is the accumulator's type only for float32 and float64.
std::uint32_t admitted_schemes(DataType dtype) noexcept {
    const bool output_is_accumulator = dtype == DataType::FLOAT32 || dtype == DataType::FLOAT64;
    return cuda::LT_REDUCTION_SCHEME_COMPUTE_TYPE | (output_is_accumulator ? cuda::LT_REDUCTION_SCHEME_OUTPUT_TYPE : 0);
}

// Whether an algorithm's result is independent of timing and keeps its partial sums in the accumulator's type
// (no split-K, or split-K by an admitted scheme) and, for float32 without TF32, is computed with plain FMA (no
// tensor-core implementation). An attribute the library cannot report counts against the algorithm.
bool admissible(const cuda::BlasLt& lt, const cuda::LtAlgo& algo, DataType dtype, bool plain_fp32) {
    std::int32_t splits = 1;
    std::uint32_t scheme = cuda::LT_REDUCTION_SCHEME_NONE;
    std::size_t written = 0;
    if (static_cast<int>(lt.api().cublasLtMatmulAlgoConfigGetAttribute(
            &algo, static_cast<cuda::LtAlgoConfigAttribute>(cuda::LT_ALGO_CONFIG_SPLITK_NUM), &splits, sizeof splits,
            &written)) != cuda::BLAS_STATUS_SUCCESS ||
        static_cast<int>(lt.api().cublasLtMatmulAlgoConfigGetAttribute(
            &algo, static_cast<cuda::LtAlgoConfigAttribute>(cuda::LT_ALGO_CONFIG_REDUCTION_SCHEME), &scheme,
            sizeof scheme, &written)) != cuda::BLAS_STATUS_SUCCESS) {
        return false;
    }
    if (splits > 1 && (scheme == cuda::LT_REDUCTION_SCHEME_NONE || (scheme & ~admitted_schemes(dtype)) != 0)) {
        return false;
    }
    if (!plain_fp32) {
        return true;
    }
    std::uint64_t impl = 0;
    if (static_cast<int>(lt.api().cublasLtMatmulAlgoCapGetAttribute(
            &algo, static_cast<cuda::LtAlgoCapAttribute>(cuda::LT_ALGO_CAP_NUMERICAL_IMPL_FLAGS), &impl, sizeof impl,
            &written)) != cuda::BLAS_STATUS_SUCCESS) {
        return false;
    }
    return (impl & cuda::LT_IMPL_FLAGS_TENSOR_OP_MASK) == 0;
}

std::string describe(const LtKey& key) {
    return std::string(to_string(static_cast<DataType>(key.dtype))) + (key.tf32 ? " (tf32)" : "") +
           " with cuBLASLt m=" + std::to_string(key.m) + " n=" + std::to_string(key.n) + " k=" + std::to_string(key.k);
}

} // namespace

struct LtMatmul::Resources {
    cuda::BlasLt lt;
    LtOwned<cuda::LtHandle> handle;
    cuda::DeviceAllocation workspace;
};

struct LtMatmul::Entry {
    LtOwned<cuda::LtMatmulDesc> desc;
    LtOwned<cuda::LtLayout> first;
    LtOwned<cuda::LtLayout> second;
    LtOwned<cuda::LtLayout> d;
    cuda::LtAlgo algo{};
    bool usable = false;
    std::string why; // when not usable
};

LtMatmul::LtMatmul(const cuda::Driver& driver, std::string who, std::vector<std::string> libraries)
    : driver_(&driver), who_(std::move(who)), libraries_(std::move(libraries)) {}

// The cache's descriptors go before the handle, and both before the workspace's context.
LtMatmul::~LtMatmul() {
    cache_.clear();
}

bool LtMatmul::load() {
    if (available_) {
        return *available_;
    }
    try {
        cuda::BlasLt lt = cuda::BlasLt::load(libraries_);
        cuda::LtHandle raw = nullptr;
        CANOPY_LT(lt, cublasLtCreate, &raw);
        LtOwned<cuda::LtHandle> handle(raw, {lt.api().cublasLtDestroy});
        cuda::DeviceAllocation workspace(*driver_, WORKSPACE_BYTES);
        resources_ = std::make_unique<Resources>(Resources{std::move(lt), std::move(handle), std::move(workspace)});
        available_ = true;
    } catch (const cuda::CudaError& e) {
        ::dprintf(2, "canopy: %s: cuBLASLt is unavailable, so matmul runs on canopy's own kernel: %s\n", who_.c_str(),
                  e.what());
        available_ = false;
    }
    return *available_;
}

bool LtMatmul::launch(const kernels::KernelCall& call, std::span<const std::uint64_t> bases, cuda::CuStream stream) {
    const Tensor& a = *call.tensors[0].view;
    const Tensor& b = *call.tensors[1].view;
    const Tensor& c = *call.tensors[2].view;
    const std::optional<LtPlan> plan = plan_lt_matmul(a, b, c);
    if (!plan || !load()) {
        ++counters_.fallbacks;
        return false;
    }
    const bool tf32 = (call.launch_flags & BUILTIN_LAUNCH_TF32) != 0;
    const std::uint64_t operands[2] = {bases[0] + a.byte_offset, bases[1] + b.byte_offset};
    const std::uint64_t first = operands[plan->first.tensor];
    const std::uint64_t second = operands[plan->second.tensor];
    const std::uint64_t d = bases[2] + c.byte_offset;
    const LtKey key = lt_key(*plan, a.dtype, tf32, first, second, d);
    Entry scratch;
    const Entry& e = entry(key, scratch);
    if (!e.usable) {
        if (!told_no_algorithm_) {
            ::dprintf(2,
                      "canopy: %s: cuBLASLt offers no deterministic algorithm for matmul %s (%s); such products "
                      "run on canopy's own kernel\n",
                      who_.c_str(), describe(key).c_str(), e.why.c_str());
            told_no_algorithm_ = true;
        }
        ++counters_.fallbacks;
        return false;
    }
    const cuda::BlasLt& lt = resources_->lt;
    // alpha = 1 and beta = 0 in the scale type (double for float64, float otherwise); beta = 0: C is only written.
    const float one_f = 1.0f;
    const float zero_f = 0.0f;
    const double one_d = 1.0;
    const double zero_d = 0.0;
    const bool wide = a.dtype == DataType::FLOAT64;
    const void* alpha = wide ? static_cast<const void*>(&one_d) : &one_f;
    const void* beta = wide ? static_cast<const void*>(&zero_d) : &zero_f;
    void* out = reinterpret_cast<void*>(static_cast<std::uintptr_t>(d));
    void* workspace = reinterpret_cast<void*>(static_cast<std::uintptr_t>(resources_->workspace.get()));
    CANOPY_LT(lt, cublasLtMatmul, resources_->handle.get(), e.desc.get(), alpha, device_pointer(first), e.first.get(),
              device_pointer(second), e.second.get(), beta, out, e.d.get(), out, e.d.get(), &e.algo, workspace,
              WORKSPACE_BYTES, stream);
    ++counters_.products;
    return true;
}

const LtMatmul::Entry& LtMatmul::entry(const LtKey& key, Entry& scratch) {
    if (const auto it = cache_.find(key); it != cache_.end()) {
        return *it->second;
    }
    if (cache_.size() >= MAX_CACHED_KEYS) {
        fill(key, scratch);
        return scratch;
    }
    auto made = std::make_unique<Entry>();
    fill(key, *made);
    return *cache_.emplace(key, std::move(made)).first->second;
}

// The descriptors of `key` and its algorithm: the best of cublasLtMatmulAlgoGetHeuristic's candidates that
// needs at most the workspace and is admissible(); none usable when there is no such candidate.
void LtMatmul::fill(const LtKey& key, Entry& e) {
    const cuda::BlasLt& lt = resources_->lt;
    const auto dtype = static_cast<DataType>(key.dtype);
    const bool wide = dtype == DataType::FLOAT64;
    const int compute = wide       ? cuda::BLAS_COMPUTE_64F
                        : key.tf32 ? cuda::BLAS_COMPUTE_32F_FAST_TF32
                                   : cuda::BLAS_COMPUTE_32F;
    const auto type = data_type(dtype);
    cuda::LtMatmulDesc desc = nullptr;
    CANOPY_LT(lt, cublasLtMatmulDescCreate, &desc, static_cast<cuda::BlasComputeType>(compute),
              data_type(wide ? DataType::FLOAT64 : DataType::FLOAT32));
    e.desc = LtOwned<cuda::LtMatmulDesc>(desc, {lt.api().cublasLtMatmulDescDestroy});
    const std::int32_t trans_a = key.transpose_first ? cuda::BLAS_OP_T : cuda::BLAS_OP_N;
    const std::int32_t trans_b = key.transpose_second ? cuda::BLAS_OP_T : cuda::BLAS_OP_N;
    CANOPY_LT(lt, cublasLtMatmulDescSetAttribute, desc,
              static_cast<cuda::LtMatmulDescAttribute>(cuda::LT_MATMUL_DESC_TRANSA), &trans_a, sizeof trans_a);
    CANOPY_LT(lt, cublasLtMatmulDescSetAttribute, desc,
              static_cast<cuda::LtMatmulDescAttribute>(cuda::LT_MATMUL_DESC_TRANSB), &trans_b, sizeof trans_b);
    auto layout = [&](std::uint64_t rows, std::uint64_t cols, std::uint64_t ld) {
        cuda::LtLayout raw = nullptr;
        CANOPY_LT(lt, cublasLtMatrixLayoutCreate, &raw, type, rows, cols, static_cast<std::int64_t>(ld));
        return LtOwned<cuda::LtLayout>(raw, {lt.api().cublasLtMatrixLayoutDestroy});
    };
    e.first = key.transpose_first ? layout(key.k, key.m, key.ld_first) : layout(key.m, key.k, key.ld_first);
    e.second = key.transpose_second ? layout(key.n, key.k, key.ld_second) : layout(key.k, key.n, key.ld_second);
    e.d = layout(key.m, key.n, key.ldd);

    cuda::LtPreference raw_pref = nullptr;
    CANOPY_LT(lt, cublasLtMatmulPreferenceCreate, &raw_pref);
    const LtOwned<cuda::LtPreference> pref(raw_pref, {lt.api().cublasLtMatmulPreferenceDestroy});
    auto prefer = [&](int attribute, const auto& value) {
        CANOPY_LT(lt, cublasLtMatmulPreferenceSetAttribute, raw_pref,
                  static_cast<cuda::LtPreferenceAttribute>(attribute), &value, sizeof value);
    };
    prefer(cuda::LT_PREF_MAX_WORKSPACE_BYTES, std::uint64_t{WORKSPACE_BYTES});
    prefer(cuda::LT_PREF_REDUCTION_SCHEME_MASK, admitted_schemes(dtype));
    prefer(cuda::LT_PREF_MIN_ALIGNMENT_A_BYTES, key.align_first);
    prefer(cuda::LT_PREF_MIN_ALIGNMENT_B_BYTES, key.align_second);
    prefer(cuda::LT_PREF_MIN_ALIGNMENT_C_BYTES, key.align_d);
    prefer(cuda::LT_PREF_MIN_ALIGNMENT_D_BYTES, key.align_d);
    const bool plain_fp32 = dtype == DataType::FLOAT32 && !key.tf32;
    if (plain_fp32) {
        prefer(cuda::LT_PREF_IMPL_MASK, std::uint64_t{~cuda::LT_IMPL_FLAGS_TENSOR_OP_MASK});
    }
    cuda::LtHeuristicResult results[CANDIDATES]{};
    int returned = 0;
    ++counters_.heuristics;
    const cuda::BlasStatus status =
        lt.api().cublasLtMatmulAlgoGetHeuristic(resources_->handle.get(), desc, e.first.get(), e.second.get(),
                                                e.d.get(), e.d.get(), raw_pref, CANDIDATES, results, &returned);
    if (static_cast<int>(status) != cuda::BLAS_STATUS_SUCCESS) {
        e.why = "cublasLtMatmulAlgoGetHeuristic: " + lt.status_name(status);
        return;
    }
    e.why = std::to_string(returned) + " candidates, none admissible";
    for (int i = 0; i < returned && i < CANDIDATES; ++i) {
        const cuda::LtHeuristicResult& r = results[i];
        if (static_cast<int>(r.state) == cuda::BLAS_STATUS_SUCCESS && r.workspaceSize <= WORKSPACE_BYTES &&
            admissible(lt, r.algo, dtype, plain_fp32)) {
            e.algo = r.algo;
            e.usable = true;
            return;
        }
    }
}

} // namespace canopy::worker
