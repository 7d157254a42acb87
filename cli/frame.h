#pragma once
// The control protocol's framing (docs/control-protocol.md): a 4-byte little-endian body length, then
// the body, one JSON object in UTF-8.
//
// Thread safety: pure functions.

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace canopy::cli {

inline constexpr std::size_t FRAME_HEADER_BYTES = 4;
// The smallest body a frame may carry ("{}").
inline constexpr std::uint32_t MIN_FRAME_BODY = 2;
// The largest reply body the CLI accepts. Replies are far smaller (a 512 KiB read is about 700 KiB of
// base64); the bound keeps a corrupt length from making the client allocate gigabytes.
inline constexpr std::uint32_t MAX_REPLY_BODY = 64u << 20;

// The header for a body of `body_size` bytes. REQUIRES: body_size <= UINT32_MAX.
std::array<char, FRAME_HEADER_BYTES> encode_frame_header(std::uint32_t body_size) noexcept;

std::uint32_t decode_frame_header(const std::array<char, FRAME_HEADER_BYTES>& header) noexcept;

// Header and body together. Throws protocol_error when the body does not fit a 32-bit length.
std::string encode_frame(std::string_view body);

} // namespace canopy::cli
