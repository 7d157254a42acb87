#include "worker/cuda/matmul_plan.h"

#include <algorithm>
#include <bit>

namespace canopy::worker {
namespace {

// A 2-D view as a dense-in-one-dimension matrix.
struct Orientation {
    bool row_major;
    std::uint64_t ld;
};

// Row-major when the inner stride is 1 (ld = the outer stride), column-major when the outer stride is 1 (ld = the
// inner stride); a dimension of size 1 has no stride that matters. Rows (columns) must not overlap: ld at least
// the length of one row (column).
std::optional<Orientation> orient(const Tensor& v) noexcept {
    const std::uint64_t rows = v.shapes[0];
    const std::uint64_t cols = v.shapes[1];
    if (v.strides[1] == 1 || cols == 1) {
        const std::uint64_t ld = rows == 1 ? std::max<std::uint64_t>(cols, 1) : v.strides[0];
        if (ld >= std::max<std::uint64_t>(cols, 1)) {
            return Orientation{true, ld};
        }
    }
    if (v.strides[0] == 1 || rows == 1) {
        const std::uint64_t ld = cols == 1 ? std::max<std::uint64_t>(rows, 1) : v.strides[1];
        if (ld >= std::max<std::uint64_t>(rows, 1)) {
            return Orientation{false, ld};
        }
    }
    return std::nullopt;
}

// Tensor `index` (rows x cols, oriented as `o`) as a column-major operand that op() turns into the matrix itself
// (want_transpose = false) or its transpose. A column-major matrix is stored as itself; a row-major one is
// stored as its transpose.
LtOperand operand(std::uint8_t index, const Tensor& v, Orientation o, bool want_transpose) noexcept {
    const std::uint64_t rows = v.shapes[0];
    const std::uint64_t cols = v.shapes[1];
    if (!o.row_major) {
        return {index, want_transpose, rows, cols, o.ld};
    }
    return {index, !want_transpose, cols, rows, o.ld};
}

} // namespace

std::optional<LtPlan> plan_lt_matmul(const Tensor& a, const Tensor& b, const Tensor& c) noexcept {
    const std::uint64_t m = a.shapes[0];
    const std::uint64_t k = a.shapes[1];
    const std::uint64_t n = b.shapes[1];
    const auto oa = orient(a);
    const auto ob = orient(b);
    const auto oc = orient(c);
    if (!oa || !ob || !oc) {
        return std::nullopt;
    }
    if (oc->row_major) {
        // Cᵀ[n,m] = Bᵀ[n,k] · Aᵀ[k,m], Cᵀ stored column-major exactly where C is stored row-major.
        return LtPlan{n, m, k, operand(1, b, *ob, true), operand(0, a, *oa, true), oc->ld, true};
    }
    return LtPlan{m, n, k, operand(0, a, *oa, false), operand(1, b, *ob, false), oc->ld, false};
}

std::uint32_t lt_alignment(std::uint64_t address, std::uint64_t ld, std::uint64_t cols,
                           std::size_t element_size) noexcept {
    constexpr std::uint64_t MOST = 256;
    std::uint64_t bits = address | MOST;
    if (cols > 1) {
        bits |= ld * element_size;
    }
    return static_cast<std::uint32_t>(std::uint64_t{1} << std::countr_zero(bits));
}

LtKey lt_key(const LtPlan& plan, DataType dtype, bool tf32, std::uint64_t first, std::uint64_t second,
             std::uint64_t d) noexcept {
    const std::size_t size = element_size(dtype);
    LtKey key;
    key.m = plan.m;
    key.n = plan.n;
    key.k = plan.k;
    key.ld_first = plan.first.ld;
    key.ld_second = plan.second.ld;
    key.ldd = plan.ldd;
    key.align_first = lt_alignment(first, plan.first.ld, plan.first.cols, size);
    key.align_second = lt_alignment(second, plan.second.ld, plan.second.cols, size);
    key.align_d = lt_alignment(d, plan.ldd, plan.n, size);
    key.dtype = static_cast<std::uint8_t>(dtype);
    key.transpose_first = plan.first.transpose;
    key.transpose_second = plan.second.transpose;
    key.tf32 = tf32;
    return key;
}

std::size_t LtKeyHash::operator()(const LtKey& key) const noexcept {
    // FNV-1a over the fields, one 64-bit word at a time.
    std::uint64_t h = 1469598103934665603ull;
    auto mix = [&h](std::uint64_t v) {
        h ^= v;
        h *= 1099511628211ull;
    };
    mix(key.m);
    mix(key.n);
    mix(key.k);
    mix(key.ld_first);
    mix(key.ld_second);
    mix(key.ldd);
    mix((std::uint64_t{key.align_first} << 32) | key.align_second);
    mix((std::uint64_t{key.align_d} << 32) | (std::uint64_t{key.dtype} << 8) |
        (std::uint64_t{key.transpose_first} << 2) | (std::uint64_t{key.transpose_second} << 1) |
        std::uint64_t{key.tf32});
    return static_cast<std::size_t>(h);
}

} // namespace canopy::worker
