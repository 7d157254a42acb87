#include "config/detail/document.h"

#include "config/bounded_json.h"
#include "config/config_error.h"
#include "config/detail/field.h"

#include <string>

namespace canopy::config::detail {
namespace {

using nlohmann::json;

// Bytes outside printable ASCII written as \xNN, so that a message quoting bad input is valid UTF-8.
std::string printable(std::string_view text) {
    static constexpr char HEX[] = "0123456789ABCDEF";
    std::string out;
    for (const char c : text) {
        const auto byte = static_cast<unsigned char>(c);
        if (byte >= 0x20 && byte < 0x7f) {
            out += c;
        } else {
            out += "\\x";
            out += HEX[byte >> 4];
            out += HEX[byte & 0xf];
        }
    }
    return out;
}

// nlohmann's message without its "[json.exception.parse_error.N] parse error at line L, column C: " prefix,
// starting with "syntax error".
std::string syntax_problem(const std::string& message) {
    const std::size_t column = message.find(", column ");
    const std::size_t colon = column == std::string::npos ? std::string::npos : message.find(": ", column);
    const std::size_t bracket = message.find("] ");
    std::string problem = colon != std::string::npos     ? message.substr(colon + 2)
                          : bracket != std::string::npos ? message.substr(bracket + 2)
                                                         : message;
    problem = printable(problem);
    return problem.starts_with("syntax error") ? problem : "syntax error: " + problem;
}

} // namespace

TextPosition position_of(std::string_view text, std::size_t offset) noexcept {
    const std::size_t end = offset < text.size() ? offset : text.size();
    TextPosition position;
    std::size_t line_start = 0;
    for (std::size_t i = 0; i < end; ++i) {
        if (text[i] == '\n') {
            ++position.line;
            line_start = i + 1;
        }
    }
    position.column = end - line_start + 1;
    return position;
}

json parse_document(std::string_view text) {
    BoundedJson parsed = parse_bounded_json(text);
    if (!parsed.refusal) {
        return std::move(parsed.value);
    }
    const JsonRefusal& refusal = *parsed.refusal;
    switch (refusal.kind) {
    case JsonRefusalKind::DUPLICATE_KEY:
        throw ConfigError(refusal.pointer + "/" + escape_pointer_token(refusal.key),
                          "duplicate key " + quote_value(json(refusal.key)));
    case JsonRefusalKind::TOO_DEEP:
        throw ConfigError(refusal.pointer, "JSON nests deeper than " + std::to_string(refusal.max_depth) + " levels");
    case JsonRefusalKind::SYNTAX:
        break;
    }
    // nlohmann reports the count of bytes read, the last of them the offending one.
    const TextPosition at = position_of(text, refusal.read > 0 ? refusal.read - 1 : 0);
    throw ConfigError("", "line " + std::to_string(at.line) + ", column " + std::to_string(at.column) + ": " +
                              syntax_problem(refusal.message));
}

} // namespace canopy::config::detail
