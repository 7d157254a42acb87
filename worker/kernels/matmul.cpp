// matmul: C[M,N] = A[M,K] . B[K,N] over row-major logical 2-D views with arbitrary strides. The CPU computes
// the contract's reference order whatever the launch flags say (docs/kernels.md).
#include "protocol/builtin_launch.h"
#include "worker/kernels/detail/element_ops.h"
#include "worker/kernels/detail/kernels.h"
#include "worker/kernels/detail/signature.h"

#include <algorithm>
#include <array>
#include <string>

namespace canopy::kernels::detail {
namespace {

// Columns of C accumulated together; bounds the accumulator's size whatever N is.
constexpr std::uint64_t COLUMN_BLOCK = 256;

bool is_float(DataType t) noexcept {
    return t == DataType::FLOAT32 || t == DataType::FLOAT64 || t == DataType::FLOAT16 || t == DataType::BFLOAT16;
}

std::string shape_text(const Tensor& t) {
    return "[" + std::to_string(t.shapes[0]) + "," + std::to_string(t.shapes[1]) + "]";
}

// A 2-D view in bytes: element (i, j) lies at origin + i*row + j*col.
struct Matrix {
    std::byte* origin;
    std::uint64_t rows;
    std::uint64_t cols;
    std::uint64_t row;
    std::uint64_t col;

    explicit Matrix(const BoundTensor& t) noexcept
        : origin(t.base + t.view->byte_offset), rows(t.view->shapes[0]), cols(t.view->shapes[1]),
          row(std::uint64_t{t.view->strides[0]} * element_size(t.view->dtype)),
          col(std::uint64_t{t.view->strides[1]} * element_size(t.view->dtype)) {}

    std::byte* at(std::uint64_t i, std::uint64_t j) const noexcept { return origin + i * row + j * col; }
};

// Each C element is acc = +0; for k = 0..K-1: acc = acc + A[m,k]*B[k,n], the product and the sum each rounded
// to Wide; then C = narrow(acc). Blocking over columns keeps that order for every element.
template <class Ops>
void multiply(const Matrix& a, const Matrix& b, const Matrix& c) {
    using W = typename Ops::Wide;
    std::array<W, COLUMN_BLOCK> acc{};
    for (std::uint64_t m = 0; m < a.rows; ++m) {
        for (std::uint64_t n0 = 0; n0 < b.cols; n0 += COLUMN_BLOCK) {
            const std::uint64_t width = std::min(COLUMN_BLOCK, b.cols - n0);
            std::fill_n(acc.begin(), width, W{0});
            for (std::uint64_t k = 0; k < a.cols; ++k) {
                const W lhs = Ops::widen(Ops::load(a.at(m, k)));
                for (std::uint64_t j = 0; j < width; ++j) {
                    const W product = lhs * Ops::widen(Ops::load(b.at(k, n0 + j)));
                    acc[j] = acc[j] + product;
                }
            }
            for (std::uint64_t j = 0; j < width; ++j) {
                Ops::store(c.at(m, n0 + j), Ops::narrow(acc[j]));
            }
        }
    }
}

} // namespace

void check_matmul(const KernelCall& call) {
    for (std::size_t i = 0; i < 3; ++i) {
        if (call.tensors[i].view->ndims != 2) {
            fail(ErrorCode::BAD_REQUEST, call,
                 arg_name(i) + " must be 2-D, has " + std::to_string(call.tensors[i].view->ndims) + " dimensions");
        }
    }
    if (!is_float(dtype_of(call, 0))) {
        fail(ErrorCode::BAD_REQUEST, call,
             arg_name(0) + " has dtype " + to_string(dtype_of(call, 0)) +
                 ", must be float32, float64, float16 or bfloat16");
    }
    expect_same_dtype(call, 1, 0);
    expect_same_dtype(call, 2, 0);
    const Tensor& a = *call.tensors[0].view;
    const Tensor& b = *call.tensors[1].view;
    const Tensor& c = *call.tensors[2].view;
    if (b.shapes[0] != a.shapes[1]) {
        fail(ErrorCode::BAD_REQUEST, call,
             "args[1] has shape " + shape_text(b) + ", args[0] has " + shape_text(a) +
                 ": args[1].shapes[0] must equal args[0].shapes[1]");
    }
    if (c.shapes[0] != a.shapes[0] || c.shapes[1] != b.shapes[1]) {
        fail(ErrorCode::BAD_REQUEST, call,
             "args[2] has shape " + shape_text(c) + ", must be [" + std::to_string(a.shapes[0]) + "," +
                 std::to_string(b.shapes[1]) + "] (args[0].shapes[0], args[1].shapes[1])");
    }
    if ((call.launch_flags & BUILTIN_LAUNCH_TF32) != 0 && a.dtype != DataType::FLOAT32) {
        fail(ErrorCode::BAD_REQUEST, call,
             "launch.tf32 applies to float32 only; args[0] has dtype " + std::string(to_string(a.dtype)));
    }
}

void run_matmul(const KernelCall& call) {
    const Matrix a(call.tensors[0]);
    const Matrix b(call.tensors[1]);
    const Matrix c(call.tensors[2]);
    switch (dtype_of(call, 0)) {
    case DataType::FLOAT64:
        multiply<Float64Ops>(a, b, c);
        return;
    case DataType::FLOAT16:
        multiply<Float16Ops>(a, b, c);
        return;
    case DataType::BFLOAT16:
        multiply<BFloat16Ops>(a, b, c);
        return;
    default:
        multiply<Float32Ops>(a, b, c);
        return;
    }
}

} // namespace canopy::kernels::detail
