#pragma once
// How a matmul's views map onto cuBLASLt, which multiplies column-major matrices: D[m,n] = op(X)[m,k] ·
// op(Y)[k,n], each stored matrix described by its rows, columns and leading dimension (the distance between
// columns, in elements), op being N (as stored) or T (transposed).
//
// A 2-D view whose inner stride is 1 is a row-major matrix with leading dimension strides[0]; one whose outer
// stride is 1 is a column-major matrix with leading dimension strides[1] (a dimension of size 1 fits either
// way). A row-major matrix read as column-major is its transpose, so a row-major C = A·B is computed as the
// column-major Cᵀ = Bᵀ·Aᵀ, and a column-major C as C = A·B; every operand then needs op N or T by its own
// layout. Views that fit neither layout (an inner stride above 1 in both dimensions, or rows that overlap) have
// no plan: canopy's own kernel runs them.
//
// LtKey is everything cuBLASLt's algorithm choice depends on: the problem as cuBLASLt sees it, the dtype, TF32,
// and the alignment of each pointer and leading dimension. Two tasks with equal keys run the same algorithm on a
// chip (LtMatmul caches it), which makes their results bitwise equal.
//
// Thread safety: pure functions and values.

#include "protocol/tensor.h"

#include <cstddef>
#include <cstdint>
#include <optional>

namespace canopy::worker {

// One stored operand of cuBLASLt's product.
struct LtOperand {
    std::uint8_t tensor; // which of the call's tensors holds it: 0 = A, 1 = B
    bool transpose;      // op T
    std::uint64_t rows;  // of the stored column-major matrix
    std::uint64_t cols;
    std::uint64_t ld; // elements between columns, >= max(1, rows)
};

struct LtPlan {
    std::uint64_t m; // D is m x n, column-major
    std::uint64_t n;
    std::uint64_t k;
    LtOperand first;  // op(first) is m x k
    LtOperand second; // op(second) is k x n
    std::uint64_t ldd;
    bool output_transposed; // D is Cᵀ (C row-major) rather than C (C column-major)
};

// The plan for C = A·B over validated 2-D views with agreeing shapes (the call passed check_builtin), or nullopt
// when the views fit no cuBLASLt layout.
std::optional<LtPlan> plan_lt_matmul(const Tensor& a, const Tensor& b, const Tensor& c) noexcept;

// The largest power of two, at most 256, dividing `address` and, when the stored matrix has more than one column,
// its leading dimension in bytes: the alignment cuBLASLt may assume for that operand.
std::uint32_t lt_alignment(std::uint64_t address, std::uint64_t ld, std::uint64_t cols,
                           std::size_t element_size) noexcept;

struct LtKey {
    std::uint64_t m = 0;
    std::uint64_t n = 0;
    std::uint64_t k = 0;
    std::uint64_t ld_first = 0;
    std::uint64_t ld_second = 0;
    std::uint64_t ldd = 0;
    std::uint32_t align_first = 0;
    std::uint32_t align_second = 0;
    std::uint32_t align_d = 0;
    std::uint8_t dtype = 0; // DataType's raw value
    bool transpose_first = false;
    bool transpose_second = false;
    bool tf32 = false;
    friend bool operator==(const LtKey&, const LtKey&) = default;
};

// The key of `plan` for operands at these device addresses (first, second, D).
LtKey lt_key(const LtPlan& plan, DataType dtype, bool tf32, std::uint64_t first, std::uint64_t second,
             std::uint64_t d) noexcept;

struct LtKeyHash {
    std::size_t operator()(const LtKey& key) const noexcept;
};

} // namespace canopy::worker
