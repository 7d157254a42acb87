#include "worker/cuda/device_view.h"

#include "worker/kernels/detail/strided.h"

namespace canopy::worker {

cuda_abi::DeviceView make_device_view(const Tensor& view, std::uint64_t device_base) noexcept {
    const kernels::detail::ByteLayout layout = kernels::detail::byte_layout(view);
    cuda_abi::DeviceView v{};
    v.origin = device_base + layout.byte_offset;
    v.count = layout.count;
    v.ndims = layout.ndims;
    v.element_size = static_cast<std::uint32_t>(layout.element_size);
    for (std::uint32_t d = 0; d < layout.ndims && d < cuda_abi::MAX_VIEW_DIMS; ++d) {
        v.shapes[d] = layout.shapes[d];
        v.strides[d] = layout.strides[d];
    }
    return v;
}

cuda_abi::MatrixView make_matrix_view(const Tensor& view, std::uint64_t device_base) noexcept {
    const std::uint64_t size = element_size(view.dtype);
    return {device_base + view.byte_offset, view.shapes[0], view.shapes[1], std::uint64_t{view.strides[0]} * size,
            std::uint64_t{view.strides[1]} * size};
}

} // namespace canopy::worker
