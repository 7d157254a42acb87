// fill, iota, copy, scale and axpy: element-wise kernels over arbitrary strided views.
#include "worker/kernels/detail/element_ops.h"
#include "worker/kernels/detail/kernels.h"
#include "worker/kernels/detail/signature.h"
#include "worker/kernels/detail/strided.h"

#include <cstring>

namespace canopy::kernels::detail {
namespace {

// Copies one element of N bytes.
template <std::size_t N>
void copy_elements(const BoundTensor& in, const BoundTensor& out) {
    for_each_element_pair(in.base, *in.view, out.base, *out.view,
                          [](std::byte* src, std::byte* dst) { std::memcpy(dst, src, N); });
}

} // namespace

void run_fill(const KernelCall& call) {
    const BoundTensor& out = call.tensors[0];
    visit_dtype(out.view->dtype, [&](auto ops) {
        using Ops = decltype(ops);
        const typename Ops::V value = Ops::from_scalar(call.scalars[0]);
        for_each_element(out.base, *out.view, [&](std::byte* p) { Ops::store(p, value); });
    });
}

void run_iota(const KernelCall& call) {
    const BoundTensor& out = call.tensors[0];
    visit_dtype(out.view->dtype, [&](auto ops) {
        using Ops = decltype(ops);
        std::uint64_t index = 0;
        for_each_element(out.base, *out.view, [&](std::byte* p) { Ops::store(p, Ops::from_index(index++)); });
    });
}

void check_copy(const KernelCall& call) {
    expect_same_dtype(call, 1, 0);
    expect_same_count(call, 1, 0);
}

// Bit-exact: elements move as bytes, so NaN payloads and the sign of zero survive.
void run_copy(const KernelCall& call) {
    const BoundTensor& in = call.tensors[0];
    const BoundTensor& out = call.tensors[1];
    switch (element_size(in.view->dtype)) {
    case 1:
        copy_elements<1>(in, out);
        return;
    case 2:
        copy_elements<2>(in, out);
        return;
    case 4:
        copy_elements<4>(in, out);
        return;
    default:
        copy_elements<8>(in, out);
        return;
    }
}

void run_scale(const KernelCall& call) {
    const BoundTensor& x = call.tensors[0];
    visit_dtype(x.view->dtype, [&](auto ops) {
        using Ops = decltype(ops);
        const typename Ops::V a = Ops::from_scalar(call.scalars[0]);
        for_each_element(x.base, *x.view, [&](std::byte* p) { Ops::store(p, Ops::mul(a, Ops::load(p))); });
    });
}

void check_axpy(const KernelCall& call) {
    expect_same_dtype(call, 1, 0);
    expect_same_count(call, 1, 0);
}

// y = a*x + y as two roundings: the product is rounded to the dtype, then the sum.
void run_axpy(const KernelCall& call) {
    const BoundTensor& x = call.tensors[0];
    const BoundTensor& y = call.tensors[1];
    visit_dtype(x.view->dtype, [&](auto ops) {
        using Ops = decltype(ops);
        const typename Ops::V a = Ops::from_scalar(call.scalars[0]);
        for_each_element_pair(x.base, *x.view, y.base, *y.view, [&](std::byte* px, std::byte* py) {
            const typename Ops::V product = Ops::mul(a, Ops::load(px));
            Ops::store(py, Ops::add(product, Ops::load(py)));
        });
    });
}

} // namespace canopy::kernels::detail
