#pragma once
// Turns config text into a JSON document. Strict JSON (no comments, no trailing commas), with the two rules
// of parse_bounded_json (config/bounded_json.h): a key appears at most once per object, and arrays and
// objects nest at most MAX_JSON_DEPTH levels deep.
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

// Throws ConfigError with pointer "" and "line L, column C: ..." for a syntax error, with the key's pointer
// for a repeated key, and with the pointer of the container that would open past the limit for nesting too
// deep ("JSON nests deeper than 64 levels").
nlohmann::json parse_document(std::string_view text);

} // namespace canopy::config::detail
