#pragma once
// Tensor: a typed, strided view over a buffer. It embeds the buffer's descriptor whole and carries no
// address.
//
// Layout (little-endian, 176 bytes):
//    0  buffer       BufferDescriptor
//   96  byte_offset  bytes from the start of the buffer; a multiple of the element size
//  104  ndims        1..MAX_DIMS
//  105  dtype        DataType
//  106  reserved[6]  zero
//  112  shapes[8]    u32, each >= 1 for the first ndims slots, zero past them
//  144  strides[8]   u32 in elements, each >= 1 for the first ndims slots, zero past them
//
// The view's bytes lie in [byte_offset, byte_offset + extent) with
//   extent = ((sum over i of (shapes[i] - 1) * strides[i]) + 1) * element_size(dtype)
// computed in saturating u64 arithmetic: tensor_extent_bytes returns UINT64_MAX when the true value does
// not fit, and validate_tensor refuses such a view by name before comparing anything with nbytes.
//
// Thread safety: plain values and pure functions.

#include "protocol/descriptor.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace canopy {

inline constexpr std::uint32_t MAX_DIMS = 8;

struct Tensor {
    BufferDescriptor buffer;
    std::uint64_t byte_offset;
    std::uint8_t ndims;
    WireEnum<DataType> dtype;
    std::array<std::uint8_t, 6> reserved;
    std::array<std::uint32_t, MAX_DIMS> shapes;
    std::array<std::uint32_t, MAX_DIMS> strides;
};

static_assert(sizeof(Tensor) == 176);
static_assert(std::is_trivially_copyable_v<Tensor>);
static_assert(std::is_standard_layout_v<Tensor>);
static_assert(offsetof(Tensor, buffer) == 0);
static_assert(offsetof(Tensor, byte_offset) == 96);
static_assert(offsetof(Tensor, ndims) == 104);
static_assert(offsetof(Tensor, dtype) == 105);
static_assert(offsetof(Tensor, reserved) == 106);
static_assert(offsetof(Tensor, shapes) == 112);
static_assert(offsetof(Tensor, strides) == 144);

// The single gate for tensors: validates the embedded descriptor (fields named "buffer.<field>"), then
// the view. Throws WireError(INVALID_TENSOR).
void validate_tensor(const Tensor& t);

// Saturating extent in bytes; UINT64_MAX when the view is unrepresentable. Meaningful for any bytes: an
// invalid dtype counts as element size 0 and gives 0, an ndims past MAX_DIMS is clamped.
std::uint64_t tensor_extent_bytes(const Tensor& t) noexcept;

// Number of elements of a view (product of its shapes), saturating at UINT64_MAX.
std::uint64_t tensor_element_count(const Tensor& t) noexcept;

// True when the view is dense row-major: strides[ndims-1] == 1 and strides[i] == strides[i+1] *
// shapes[i+1].
bool tensor_is_contiguous(const Tensor& t) noexcept;

// Builds a validated view (throws WireError). Empty strides mean row-major.
Tensor make_tensor(const BufferDescriptor& buffer, DataType dtype, std::initializer_list<std::uint32_t> shapes,
                   std::initializer_list<std::uint32_t> strides = {}, std::uint64_t byte_offset = 0);

bool operator==(const Tensor& a, const Tensor& b) noexcept;

} // namespace canopy
