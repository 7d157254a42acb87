#pragma once
// The image of canopy's CUDA kernels (kernels.cu), embedded at build time: a fatbin with sm_90 code and
// compute_90 PTX, made by nvcc and turned into a byte array by embed_fatbin.cmake. A build without the CUDA
// Toolkit embeds nothing and kernel_image() is empty; cuda chips then refuse to start.
//
// Thread safety: immutable data.

#include <cstddef>
#include <cstdint>
#include <span>

namespace canopy::worker {

// The first four bytes of a fatbin, little-endian.
inline constexpr std::uint32_t FATBIN_MAGIC = 0xBA55ED50;

// The embedded fatbin, 64-byte aligned; empty without the toolkit.
std::span<const std::byte> kernel_image() noexcept;

} // namespace canopy::worker
