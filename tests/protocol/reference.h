#pragma once
// Independent reference computations for the protocol tests and the fuzz targets: the dtype table and
// the view extent in 128-bit arithmetic, and the invariants every decoded TaskArgs must keep. Written
// from the wire rules of docs/protocol.md, not from the library's code, and free of Catch2 so fuzz targets can use it.
//
// Thread safety: pure functions.

#include "protocol/task_args.h"

#include <array>
#include <cstdint>
#include <string>

namespace canopy::test {

__extension__ typedef unsigned __int128 u128;

// Element size of a raw dtype byte; 0 for a value that is not a DataType.
inline std::uint32_t reference_element_size(std::uint8_t dtype) {
    constexpr std::array<std::uint32_t, 10> SIZES = {0, 4, 2, 2, 8, 1, 1, 2, 4, 8};
    return dtype < SIZES.size() ? SIZES[dtype] : 0;
}

// ((sum (shape_i - 1) * stride_i) + 1) * elem in 128-bit arithmetic, for a view with ndims 1..8 and
// shapes >= 1. At most 8 products below 2^64 each, times an element size of at most 8: nothing wraps.
inline u128 reference_extent(const Tensor& t) {
    u128 last = 0;
    for (std::uint32_t i = 0; i < t.ndims && i < MAX_DIMS; ++i) {
        last += u128{t.shapes[i] - 1U} * u128{t.strides[i]};
    }
    return (last + 1) * u128{reference_element_size(t.dtype.raw())};
}

// Empty when every tensor of a decoded `args` is a well-formed view lying inside its buffer
// (byte_offset + extent <= nbytes, aligned to the element size); otherwise what is wrong.
inline std::string check_decoded(const TaskArgs& args) {
    for (std::size_t i = 0; i < args.tensors.size(); ++i) {
        const Tensor& t = args.tensors[i].tensor;
        const std::string where = "args[" + std::to_string(i) + "]: ";
        const std::uint32_t elem = reference_element_size(t.dtype.raw());
        if (elem == 0 || t.ndims < 1 || t.ndims > MAX_DIMS) {
            return where + "decoded a tensor with a bad dtype or ndims";
        }
        for (std::uint32_t d = 0; d < t.ndims; ++d) {
            if (t.shapes[d] == 0 || t.strides[d] == 0) {
                return where + "decoded a zero shape or stride";
            }
        }
        if (t.byte_offset % elem != 0) {
            return where + "decoded a misaligned byte offset";
        }
        if (u128{t.byte_offset} + reference_extent(t) > u128{t.buffer.nbytes}) {
            return where + "view at offset " + std::to_string(t.byte_offset) + " ends past the " +
                   std::to_string(t.buffer.nbytes) + "-byte buffer";
        }
    }
    return {};
}

} // namespace canopy::test
