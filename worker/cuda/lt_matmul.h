#pragma once
// LtMatmul: a cuda chip's matmul through cuBLASLt (cuda/blas_lt.h), at the speed of NVIDIA's own kernels.
//
// On its first product it loads cuBLASLt, creates a handle and a WORKSPACE_BYTES device workspace, all kept
// for the chip's life. Each product is planned (worker/cuda/matmul_plan.h); the algorithm for its LtKey is
// chosen once, by cublasLtMatmulAlgoGetHeuristic, and cached with the key's descriptors, so every later task
// with an equal key runs the same algorithm with the same workspace and gives the same bits. The choice admits
// only algorithms whose result does not depend on timing and whose partial sums stay in the accumulator's type:
// no split-K, or split-K whose parts are reduced in a separate step in float32/float64 (reduction scheme
// COMPUTE_TYPE, and OUTPUT_TYPE where the output is float32 or float64; never INPLACE), and for float32 without
// TF32 only plain FMA kernels (no tensor-core implementation, so no TF32 and no emulation).
//
// Arithmetic: float32 computes in float32 (CUBLAS_COMPUTE_32F), or with TF32 tensor cores when the task's
// launch asks (CUBLAS_COMPUTE_32F_FAST_TF32); float16 and bfloat16 on tensor cores with float32 accumulation;
// float64 in float64 (CUBLAS_COMPUTE_64F). docs/kernels.md states how far the results may lie from the sim
// chip's.
//
// launch() returns false, and queues nothing, when the call needs canopy's own kernel instead: cuBLASLt is not
// available, the views fit no cuBLASLt layout, or the heuristic offers no admissible algorithm for the key (or
// fails). The first time the library is missing, and the first time a key has no algorithm, it says so on stderr
// (the chip's log), once each.
//
// Ownership: borrows the driver. REQUIRES the context current at the first launch() to be current at every
// later call and to outlive the object. Thread safety: one caller at a time (the cache and workspace are
// shared by launches).

#include "cuda/blas_lt.h"
#include "cuda/memory.h"
#include "worker/cuda/matmul_plan.h"
#include "worker/kernels/builtin.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

namespace canopy::worker {

class LtMatmul {
public:
    static constexpr std::size_t WORKSPACE_BYTES = std::size_t{32} << 20;
    // Keys cached at most; past it, a new key's algorithm is chosen for each task and not kept.
    static constexpr std::size_t MAX_CACHED_KEYS = 1024;
    // Heuristic results examined per key, best first.
    static constexpr int CANDIDATES = 16;

    // `who` names the chip in log lines ("cuda chip /chip0"); `libraries` are the names BlasLt::load tries.
    LtMatmul(const cuda::Driver& driver, std::string who,
             std::vector<std::string> libraries = cuda::BlasLt::candidates());
    ~LtMatmul();
    LtMatmul(const LtMatmul&) = delete;
    LtMatmul& operator=(const LtMatmul&) = delete;

    // Queues C = A·B on `stream` through cuBLASLt and returns true, or returns false having queued nothing (see
    // above). REQUIRES: call is a matmul that passed check_builtin, device_bases[i] is the device address of byte
    // 0 of call.tensors[i]'s buffer. Throws CudaError when cuBLASLt or the driver fails.
    bool launch(const kernels::KernelCall& call, std::span<const std::uint64_t> device_bases, cuda::CuStream stream);

    struct Counters {
        std::uint64_t products = 0;   // queued through cuBLASLt
        std::uint64_t fallbacks = 0;  // handed back to canopy's kernel
        std::uint64_t heuristics = 0; // cublasLtMatmulAlgoGetHeuristic calls
    };
    const Counters& counters() const noexcept { return counters_; }
    // Whether cuBLASLt loaded; nullopt before the first launch().
    std::optional<bool> available() const noexcept { return available_; }

private:
    struct Resources;
    struct Entry;

    bool load();
    const Entry& entry(const LtKey& key, Entry& scratch);
    void fill(const LtKey& key, Entry& entry);

    const cuda::Driver* driver_;
    std::string who_;
    std::vector<std::string> libraries_;
    std::optional<bool> available_;
    bool told_no_algorithm_ = false;
    std::unique_ptr<Resources> resources_;
    std::unordered_map<LtKey, std::unique_ptr<Entry>, LtKeyHash> cache_;
    Counters counters_;
};

} // namespace canopy::worker
