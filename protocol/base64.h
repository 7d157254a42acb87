#pragma once
// Base64 (RFC 4648 section 4, standard alphabet, with padding): how buffer and module bytes travel in the
// control protocol's JSON.
//
// Bytes are held in std::string (any value, including NUL). The decoder is strict: the length is a
// multiple of 4, every character is in the alphabet, '=' appears only as one or two final padding
// characters, and the bits that padding leaves over are zero, so every byte string has exactly one
// accepted encoding.
//
// Thread safety: pure functions.

#include <stdexcept>
#include <string>
#include <string_view>

namespace canopy {

// Thrown by base64_decode; what() names the problem and its position ("base64: character 5 ('*') is not
// in the alphabet").
class Base64Error : public std::invalid_argument {
public:
    using std::invalid_argument::invalid_argument;
};

// The encoded length of n bytes: 4 * ceil(n / 3).
constexpr std::size_t base64_encoded_size(std::size_t n) noexcept {
    return (n + 2) / 3 * 4;
}

std::string base64_encode(std::string_view bytes);

// Throws Base64Error for any text that base64_encode does not produce.
std::string base64_decode(std::string_view text);

} // namespace canopy
