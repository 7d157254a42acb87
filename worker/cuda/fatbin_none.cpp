// The kernel image of a build without the CUDA Toolkit: none.
#include "worker/cuda/fatbin.h"

namespace canopy::worker {

std::span<const std::byte> kernel_image() noexcept {
    return {};
}

} // namespace canopy::worker
