#include "protocol/base64.h"

#include <array>
#include <cstdint>

namespace canopy {

namespace {

constexpr std::string_view ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
constexpr std::int8_t NOT_IN_ALPHABET = -1;

// Maps a character to its 6-bit value, or NOT_IN_ALPHABET.
constexpr std::array<std::int8_t, 256> make_decode_table() {
    std::array<std::int8_t, 256> table{};
    table.fill(NOT_IN_ALPHABET);
    for (std::size_t i = 0; i < ALPHABET.size(); ++i) {
        table[static_cast<unsigned char>(ALPHABET[i])] = static_cast<std::int8_t>(i);
    }
    return table;
}

constexpr std::array<std::int8_t, 256> DECODE_TABLE = make_decode_table();

std::uint32_t byte_at(std::string_view bytes, std::size_t i) {
    return static_cast<unsigned char>(bytes[i]);
}

[[noreturn]] void fail(const std::string& problem) {
    throw Base64Error("base64: " + problem);
}

std::string describe(char c) {
    const auto u = static_cast<unsigned char>(c);
    if (u >= 0x20 && u < 0x7f) {
        return std::string("'") + c + "'";
    }
    static constexpr std::string_view HEX = "0123456789abcdef";
    return std::string("byte 0x") + HEX[u >> 4] + HEX[u & 0xf];
}

// The 6-bit value of text[i]; fails for a character outside the alphabet (padding included).
std::uint32_t sextet(std::string_view text, std::size_t i) {
    const std::int8_t v = DECODE_TABLE[static_cast<unsigned char>(text[i])];
    if (v == NOT_IN_ALPHABET) {
        fail("character " + std::to_string(i) + " (" + describe(text[i]) + ") is not in the alphabet" +
             (text[i] == '=' ? " here: '=' may only end the text" : ""));
    }
    return static_cast<std::uint32_t>(v);
}

} // namespace

std::string base64_encode(std::string_view bytes) {
    std::string out;
    out.reserve(base64_encoded_size(bytes.size()));
    std::size_t i = 0;
    for (; i + 3 <= bytes.size(); i += 3) {
        const std::uint32_t v = byte_at(bytes, i) << 16 | byte_at(bytes, i + 1) << 8 | byte_at(bytes, i + 2);
        out += ALPHABET[v >> 18];
        out += ALPHABET[(v >> 12) & 0x3f];
        out += ALPHABET[(v >> 6) & 0x3f];
        out += ALPHABET[v & 0x3f];
    }
    const std::size_t rest = bytes.size() - i;
    if (rest == 1) {
        const std::uint32_t v = byte_at(bytes, i) << 16;
        out += ALPHABET[v >> 18];
        out += ALPHABET[(v >> 12) & 0x3f];
        out += "==";
    } else if (rest == 2) {
        const std::uint32_t v = byte_at(bytes, i) << 16 | byte_at(bytes, i + 1) << 8;
        out += ALPHABET[v >> 18];
        out += ALPHABET[(v >> 12) & 0x3f];
        out += ALPHABET[(v >> 6) & 0x3f];
        out += '=';
    }
    return out;
}

std::string base64_decode(std::string_view text) {
    if (text.size() % 4 != 0) {
        fail("length " + std::to_string(text.size()) + " is not a multiple of 4");
    }
    std::size_t padding = 0;
    if (!text.empty() && text.back() == '=') {
        padding = text[text.size() - 2] == '=' ? 2 : 1;
    }
    const std::string_view body = text.substr(0, text.size() - padding);
    std::string out;
    out.reserve(text.size() / 4 * 3);
    std::size_t i = 0;
    for (; i + 4 <= body.size(); i += 4) {
        const std::uint32_t v =
            sextet(body, i) << 18 | sextet(body, i + 1) << 12 | sextet(body, i + 2) << 6 | sextet(body, i + 3);
        out += static_cast<char>(v >> 16);
        out += static_cast<char>((v >> 8) & 0xff);
        out += static_cast<char>(v & 0xff);
    }
    if (padding == 2) {
        const std::uint32_t v = sextet(body, i) << 18 | sextet(body, i + 1) << 12;
        if ((v & 0xffff) != 0) {
            fail("character " + std::to_string(i + 1) + " leaves non-zero bits before the padding");
        }
        out += static_cast<char>(v >> 16);
    } else if (padding == 1) {
        const std::uint32_t v = sextet(body, i) << 18 | sextet(body, i + 1) << 12 | sextet(body, i + 2) << 6;
        if ((v & 0xff) != 0) {
            fail("character " + std::to_string(i + 2) + " leaves non-zero bits before the padding");
        }
        out += static_cast<char>(v >> 16);
        out += static_cast<char>((v >> 8) & 0xff);
    }
    return out;
}

} // namespace canopy
