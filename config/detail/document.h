#pragma once
// Turns config text into a JSON document. Strict JSON (no comments, no trailing commas), with one rule
// nlohmann's parser does not enforce: a key appears at most once per object.
//
// Thread safety: pure functions.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string_view>

namespace canopy::config::detail {

struct TextPosition {
    std::size_t line = 1;   // 1-based
    std::size_t column = 1; // 1-based, in bytes
};

// The line and column of the byte at 0-based `offset`; an offset past the end names the end of the text.
TextPosition position_of(std::string_view text, std::size_t offset) noexcept;

// Throws ConfigError with pointer "" and "line L, column C: ..." for a syntax error, and with the key's
// pointer for a repeated key.
nlohmann::json parse_document(std::string_view text);

} // namespace canopy::config::detail
