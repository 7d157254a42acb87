#include "worker/kernels/detail/strided.h"

#include <algorithm>

namespace canopy::kernels::detail {

ByteLayout byte_layout(const Tensor& view) noexcept {
    ByteLayout layout;
    layout.element_size = element_size(view.dtype);
    layout.byte_offset = view.byte_offset;
    layout.count = tensor_element_count(view);

    // Collected innermost first.
    std::array<std::uint64_t, MAX_DIMS> shapes{};
    std::array<std::uint64_t, MAX_DIMS> strides{};
    std::uint32_t n = 0;
    for (std::uint32_t i = std::min<std::uint32_t>(view.ndims, MAX_DIMS); i-- > 0;) {
        const std::uint64_t shape = view.shapes[i];
        const std::uint64_t stride = std::uint64_t{view.strides[i]} * layout.element_size;
        if (shape == 1) {
            continue;
        }
        // The product is at most twice the view's extent, and a view that fits a mapping spans far less than 2^63.
        if (n > 0 && stride == strides[n - 1] * shapes[n - 1]) {
            shapes[n - 1] *= shape;
            continue;
        }
        shapes[n] = shape;
        strides[n] = stride;
        ++n;
    }
    if (n == 0) {
        shapes[0] = 1;
        strides[0] = layout.element_size;
        n = 1;
    }
    layout.ndims = n;
    for (std::uint32_t i = 0; i < n; ++i) {
        layout.shapes[i] = shapes[n - 1 - i];
        layout.strides[i] = strides[n - 1 - i];
    }
    return layout;
}

} // namespace canopy::kernels::detail
