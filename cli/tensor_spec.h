#pragma once
// The command-line forms of task arguments, turned into the control protocol's JSON (TASK "args").
//
// Tensor SPEC: BUFFER_ID:DTYPE:SHAPE[:STRIDES[:OFFSET]]
//   BUFFER_ID  the buffer's canonical identity or preloaded name; may contain dots, never a colon
//   DTYPE      float32 float16 bfloat16 float64 int8 uint8 int16 int32 int64
//   SHAPE      extents joined by 'x', outermost first: 1024, 64x64 (1..MAX_DIMS extents, each >= 1)
//   STRIDES    element strides joined by 'x', one per extent; empty means row-major
//   OFFSET     byte offset of the first element (byte counts as parse_byte_size takes them)
// gives {"buffer", "dtype", "shape"} plus "strides" and "byte_offset" when given.
//
// Scalar: TYPE:VALUE with TYPE float32, float64 or int64: float32:1.5 gives {"float32": 1.5}.
//
// Both throw usage_error naming the option and the text when the form is wrong; the daemon checks the
// rest (that the buffer exists, that the view fits it).
//
// Thread safety: pure functions.

#include <nlohmann/json.hpp>
#include <string_view>

namespace canopy::cli {

// `option` ("--in") prefixes error messages.
nlohmann::json parse_tensor_spec(std::string_view spec, std::string_view option);

nlohmann::json parse_scalar(std::string_view text, std::string_view option);

} // namespace canopy::cli
