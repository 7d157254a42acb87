// reduce_sum: the sum of a view's elements in row-major order, into a one-element view.
#include "worker/kernels/detail/element_ops.h"
#include "worker/kernels/detail/kernels.h"
#include "worker/kernels/detail/signature.h"
#include "worker/kernels/detail/strided.h"

namespace canopy::kernels::detail {

void check_reduce_sum(const KernelCall& call) {
    expect_same_dtype(call, 1, 0);
    expect_count(call, 1, 1, "must have exactly 1");
}

// Float dtypes accumulate in double, integers in wrapping int64; one rounding or wrap to the dtype at the end.
void run_reduce_sum(const KernelCall& call) {
    const BoundTensor& x = call.tensors[0];
    const BoundTensor& y = call.tensors[1];
    visit_dtype(x.view->dtype, [&](auto ops) {
        using Ops = decltype(ops);
        typename Ops::Acc acc{};
        for_each_element(x.base, *x.view, [&](std::byte* p) { acc = Ops::acc_add(acc, Ops::load(p)); });
        // Every index of a one-element view is 0, so its element sits at byte_offset.
        Ops::store(y.base + y.view->byte_offset, Ops::from_acc(acc));
    });
}

} // namespace canopy::kernels::detail
