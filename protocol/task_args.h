#pragma once
// The TaskArgs blob: one contiguous encoding of a task's arguments, carried through every mailbox. There
// is no other path from bytes to a Tensor: decode_task_args runs validate_tensor on every element.
//
// Layout (little-endian):
//   header, 16 bytes
//     0  magic         TASK_ARGS_MAGIC
//     4  version       TASK_ARGS_VERSION
//     6  reserved      zero
//     8  total_len     length of the whole blob in bytes; must equal the bytes handed to the decoder
//    12  tensor_count  <= MAX_TENSOR_ARGS
//    14  scalar_count  <= MAX_SCALAR_ARGS
//   tensor_count records of 184 bytes: tag (TensorTag), 7 zero bytes, Tensor
//   scalar_count records of 16 bytes:  kind (ScalarKind), 7 zero bytes, 8 value bytes
// A FLOAT32 scalar keeps its bit pattern in the low 4 value bytes; the high 4 are zero.
//
// Thread safety: pure functions.

#include "protocol/tensor.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace canopy {

inline constexpr std::uint32_t TASK_ARGS_MAGIC = 0x47415443; // "CTAG" in little-endian bytes
inline constexpr std::uint16_t TASK_ARGS_VERSION = 1;
inline constexpr std::uint32_t MAX_TENSOR_ARGS = 32;
inline constexpr std::uint32_t MAX_SCALAR_ARGS = 16;
inline constexpr std::uint32_t TASK_ARGS_HEADER_BYTES = 16;
inline constexpr std::uint32_t TENSOR_RECORD_BYTES = 8 + sizeof(Tensor);
inline constexpr std::uint32_t SCALAR_RECORD_BYTES = 16;
inline constexpr std::uint32_t MAX_TASK_ARGS_BYTES =
    TASK_ARGS_HEADER_BYTES + MAX_TENSOR_ARGS * TENSOR_RECORD_BYTES + MAX_SCALAR_ARGS * SCALAR_RECORD_BYTES;

enum class TensorTag : std::uint8_t { INPUT = 1, OUTPUT = 2, INOUT = 3 };
enum class ScalarKind : std::uint8_t { FLOAT32 = 1, FLOAT64 = 2, INT64 = 3 };

constexpr bool is_valid(TensorTag t) noexcept {
    return t >= TensorTag::INPUT && t <= TensorTag::INOUT;
}
constexpr bool is_valid(ScalarKind k) noexcept {
    return k >= ScalarKind::FLOAT32 && k <= ScalarKind::INT64;
}
// Whether an argument with this tag reads / writes its view.
constexpr bool tag_reads(TensorTag t) noexcept {
    return t == TensorTag::INPUT || t == TensorTag::INOUT;
}
constexpr bool tag_writes(TensorTag t) noexcept {
    return t == TensorTag::OUTPUT || t == TensorTag::INOUT;
}
const char* to_string(TensorTag t) noexcept;
const char* to_string(ScalarKind k) noexcept;

struct TensorArg {
    Tensor tensor;
    TensorTag tag;
    friend bool operator==(const TensorArg&, const TensorArg&) = default;
};

struct ScalarArg {
    ScalarKind kind;
    std::uint64_t bits; // the value's bit pattern, as on the wire

    static ScalarArg f32(float v) noexcept;
    static ScalarArg f64(double v) noexcept;
    static ScalarArg i64(std::int64_t v) noexcept;
    float as_f32() const noexcept;
    double as_f64() const noexcept;
    std::int64_t as_i64() const noexcept;
    // The value converted to double / int64, whatever its kind.
    double to_double() const noexcept;
    std::int64_t to_int64() const noexcept;

    friend bool operator==(const ScalarArg&, const ScalarArg&) = default;
};

struct TaskArgs {
    std::vector<TensorArg> tensors;
    std::vector<ScalarArg> scalars;
    friend bool operator==(const TaskArgs&, const TaskArgs&) = default;
};

// Encoded size of `args` in bytes.
std::size_t task_args_size(const TaskArgs& args) noexcept;

// Validates every tensor and tag and the counts (throws WireError(INVALID_TENSOR)), then encodes.
std::vector<std::byte> encode_task_args(const TaskArgs& args);
// The same into caller-provided storage; returns the bytes written. Throws WireError when `out` is too
// small.
std::size_t encode_task_args_into(const TaskArgs& args, std::span<std::byte> out);

// Decodes and validates a blob. Throws WireError(INVALID_TENSOR) naming the field ("header.total_len",
// "args[2].strides[0]", "scalars[0].kind"). Every returned tensor passed validate_tensor.
TaskArgs decode_task_args(std::span<const std::byte> blob);
// The same, reusing the vectors of `out` (cleared first) so a steady stream of tasks allocates nothing.
void decode_task_args_into(std::span<const std::byte> blob, TaskArgs& out);

} // namespace canopy
