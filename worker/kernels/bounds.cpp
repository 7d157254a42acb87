#include "worker/kernels/bounds.h"

#include <cmath>
#include <limits>

namespace canopy::kernels {
namespace {

bool is_float(DataType t) noexcept {
    return t == DataType::FLOAT32 || t == DataType::FLOAT64 || t == DataType::FLOAT16 || t == DataType::BFLOAT16;
}

} // namespace

double unit_roundoff(DataType dtype) noexcept {
    switch (dtype) {
    case DataType::FLOAT32:
        return std::ldexp(1.0, -24);
    case DataType::FLOAT64:
        return std::ldexp(1.0, -53);
    case DataType::FLOAT16:
        return std::ldexp(1.0, -11);
    case DataType::BFLOAT16:
        return std::ldexp(1.0, -8);
    default:
        return 0.0;
    }
}

double smallest_subnormal(DataType dtype) noexcept {
    switch (dtype) {
    case DataType::FLOAT32:
        return std::ldexp(1.0, -149);
    case DataType::FLOAT64:
        return std::ldexp(1.0, -1074);
    case DataType::FLOAT16:
        return std::ldexp(1.0, -24);
    case DataType::BFLOAT16:
        return std::ldexp(1.0, -133);
    default:
        return 0.0;
    }
}

double gamma(std::uint64_t k, double u) noexcept {
    const double ku = static_cast<double>(k) * u;
    return ku >= 1.0 ? std::numeric_limits<double>::infinity() : ku / (1.0 - ku);
}

double reduce_sum_bound(DataType dtype, std::uint64_t n, double sum_abs, double y_a, double y_b) noexcept {
    if (!is_float(dtype)) {
        return 0.0;
    }
    const double summation = 2.0 * gamma(n > 0 ? n - 1 : 0, unit_roundoff(DataType::FLOAT64)) * sum_abs;
    if (dtype == DataType::FLOAT64) {
        return summation;
    }
    return summation + unit_roundoff(dtype) * (std::fabs(y_a) + std::fabs(y_b)) + smallest_subnormal(dtype);
}

double matmul_bound(DataType dtype, std::uint64_t k, bool tf32, double sum_abs_products, double c_a,
                    double c_b) noexcept {
    if (!is_float(dtype)) {
        return 0.0;
    }
    const double u_acc = unit_roundoff(dtype == DataType::FLOAT64 ? DataType::FLOAT64 : DataType::FLOAT32);
    const double rho = tf32 ? 2.0 * TF32_UNIT + TF32_UNIT * TF32_UNIT : 0.0;
    const double relative = gamma(k, u_acc) + ((1.0 + rho) * (1.0 + gamma(k, 2.0 * u_acc)) - 1.0);
    const double bound = relative * sum_abs_products;
    if (dtype == DataType::FLOAT32 || dtype == DataType::FLOAT64) {
        return bound;
    }
    return bound + unit_roundoff(dtype) * (std::fabs(c_a) + std::fabs(c_b)) + smallest_subnormal(dtype);
}

} // namespace canopy::kernels
