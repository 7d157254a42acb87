#pragma once
// fill, iota, copy, scale and axpy over arbitrary strided views: one thread per element in a grid-stride
// loop. Elements are paired by logical index, so copy and axpy reshape when the shapes differ.
//
// REQUIRES (checked on the host before launch): the call passed check_builtin; every view lies inside a buffer
// this context can address; written views do not overlap other views of the call.

#include "worker/cuda/device_ops.cuh"

#include <cstring>

namespace canopy::worker::cuda_kernels {

__device__ __forceinline__ std::uint64_t first_index() {
    return static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
}

__device__ __forceinline__ std::uint64_t grid_stride() {
    return static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
}

// The scalar the host converted to the dtype, from its low-aligned bits.
template <class V>
__device__ __forceinline__ V scalar_value(std::uint64_t bits) {
    V v;
    memcpy(&v, &bits, sizeof v);
    return v;
}

template <class Ops>
__device__ void fill_body(const cuda_abi::ElementwiseParams& p) {
    using V = typename Ops::V;
    const V value = scalar_value<V>(p.scalar);
    for (std::uint64_t i = first_index(); i < p.out.count; i += grid_stride()) {
        store<V>(element_address(p.out, i), value);
    }
}

template <class Ops>
__device__ void iota_body(const cuda_abi::ElementwiseParams& p) {
    using V = typename Ops::V;
    for (std::uint64_t i = first_index(); i < p.out.count; i += grid_stride()) {
        store<V>(element_address(p.out, i), Ops::from_index(i));
    }
}

// Bit-exact: elements move as unsigned integers of their size, so NaN payloads and signed zeros survive.
template <class Bits>
__device__ void copy_body(const cuda_abi::ElementwiseParams& p) {
    for (std::uint64_t i = first_index(); i < p.out.count; i += grid_stride()) {
        store<Bits>(element_address(p.out, i), load<Bits>(element_address(p.in, i)));
    }
}

template <class Ops>
__device__ void scale_body(const cuda_abi::ElementwiseParams& p) {
    using V = typename Ops::V;
    const V a = scalar_value<V>(p.scalar);
    for (std::uint64_t i = first_index(); i < p.out.count; i += grid_stride()) {
        const std::uint64_t address = element_address(p.out, i);
        store<V>(address, Ops::mul(a, load<V>(address)));
    }
}

// y = a*x + y as two roundings: the product is rounded to the dtype, then the sum.
template <class Ops>
__device__ void axpy_body(const cuda_abi::ElementwiseParams& p) {
    using V = typename Ops::V;
    const V a = scalar_value<V>(p.scalar);
    for (std::uint64_t i = first_index(); i < p.out.count; i += grid_stride()) {
        const std::uint64_t y = element_address(p.out, i);
        const V product = Ops::mul(a, load<V>(element_address(p.in, i)));
        store<V>(y, Ops::add(product, load<V>(y)));
    }
}

} // namespace canopy::worker::cuda_kernels
