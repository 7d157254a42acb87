#pragma once
// The PTX text of tests/cuda/user_module.cu, built by nvcc -ptx with the CUDA Toolkit; empty without it.
// Kernels: saxpy(float* y, const float* x, float a, long long n), scale_first(double a, double* x, long long n),
// empty(), bounded(int* out) (at most 128 threads), shared_copy(int* out, const int* in, long long n) (dynamic
// shared memory), static_shared(int* out) (4 KiB static shared memory).

#include <cstddef>
#include <string_view>
#include <vector>

namespace canopy::testing {

std::string_view user_module_ptx() noexcept;

inline std::vector<std::byte> user_module_image() {
    const std::string_view text = user_module_ptx();
    const auto* p = reinterpret_cast<const std::byte*>(text.data());
    return {p, p + text.size()};
}

} // namespace canopy::testing
