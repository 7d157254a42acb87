#pragma once
// How far a cuda chip's matmul and float reduce_sum may lie from the sim chip's (docs/kernels.md, "How far
// cuda may differ"). The sim chip computes the contract's reference order; a cuda chip associates the same
// sums differently (a tree for reduce_sum, cuBLASLt's blocking for matmul), so the two agree within these
// bounds and not bit for bit. Each bound is a worst case derived from the standard error analysis of
// floating-point summation (Higham, Accuracy and Stability of Numerical Algorithms, 2nd ed., ch. 3-4), with
// u the unit roundoff and gamma(k, u) = k u / (1 - k u):
//
//   reduce_sum over n elements, both sides accumulating in double (u_d = 2^-53) in any order, each rounded
//   once to the dtype (unit roundoff u_t, smallest subnormal eta_t):
//     |y_cuda - y_sim| <= 2 gamma(n - 1, u_d) sum|x_i| + u_t (|y_cuda| + |y_sim|) + eta_t
//   (float64 has no final rounding: the last two terms are 0).
//
//   matmul, per element C[m,n] with K products, the sim chip accumulating in u_acc (float for float32,
//   float16 and bfloat16; double for float64) at one rounding per operation, the GPU at up to 2 u_acc per
//   operation (tensor cores may truncate rather than round), its operands first rounded to TF32 when the
//   task allows it (relative error up to u_in = 2^-10 each, so rho = 2 u_in + u_in^2 per product; 0 without):
//     |C_cuda - C_sim| <= (gamma(K, u_acc) + (1 + rho)(1 + gamma(K, 2 u_acc)) - 1) sum_k |A[m,k] B[k,n]|
//                         + u_out (|C_cuda| + |C_sim|) + eta_out
//   where u_out, eta_out are the output's unit roundoff and smallest subnormal for float16 and bfloat16 (whose
//   accumulator is rounded once to 16 bits on each side) and 0 for float32 and float64.
//
// The bounds hold while no partial sum overflows; a NaN or an infinity on one side must be the same class on the
// other. Integer dtypes have bound 0: their sums are exact modulo 2^bits on both sides.
//
// Thread safety: pure functions.

#include "protocol/tensor.h"

#include <cstdint>

namespace canopy::kernels {

// u = 2^-p for a p-bit significand: float32 2^-24, float64 2^-53, float16 2^-11, bfloat16 2^-8; 0 for integers.
double unit_roundoff(DataType dtype) noexcept;
// The smallest positive subnormal: float32 2^-149, float64 2^-1074, float16 2^-24, bfloat16 2^-133; 0 for
// integers.
double smallest_subnormal(DataType dtype) noexcept;
// gamma(k, u) = k u / (1 - k u); +infinity when k u >= 1.
double gamma(std::uint64_t k, double u) noexcept;

// The largest |y_cuda - y_sim| allowed for reduce_sum of `n` elements of `dtype` whose magnitudes sum to
// `sum_abs`, where y_a and y_b are the two results (as doubles). 0 for integer dtypes.
double reduce_sum_bound(DataType dtype, std::uint64_t n, double sum_abs, double y_a, double y_b) noexcept;

// The TF32 input rounding allowed per operand (2^-10).
inline constexpr double TF32_UNIT = 1.0 / 1024.0;

// The largest |C_cuda - C_sim| allowed for one element of a matmul of `dtype` over `k` products whose
// magnitudes sum to `sum_abs_products`, with TF32 allowed or not, where c_a and c_b are the two results.
double matmul_bound(DataType dtype, std::uint64_t k, bool tf32, double sum_abs_products, double c_a,
                    double c_b) noexcept;

} // namespace canopy::kernels
