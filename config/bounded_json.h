#pragma once
// parse_bounded_json: strict JSON text to a tree, refusing two things nlohmann's own parse accepts:
// arrays and objects nested more than a limit deep, and a key given twice in one object.
//
// The text is read through nlohmann's SAX interface, whose parser keeps its nesting state on the heap,
// and the tree is built from the events as they arrive. The limit is checked when a container opens, so
// no tree deeper than the limit is ever built, and nothing here or in the parser recurses in proportion
// to the depth of the text. The trees this returns are therefore safe to dump, copy and compare, which
// nlohmann does recursively. The config parser and the control socket both read their input here.
//
// Thread safety: a pure function.

#include <cstddef>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

namespace canopy::config {

// The deepest nesting accepted: the outermost array or object is level 1, a container inside it level 2.
// Scalars do not count, so an array at level 64 may hold numbers but not an array.
inline constexpr std::size_t MAX_JSON_DEPTH = 64;

enum class JsonRefusalKind {
    SYNTAX,        // not JSON (nlohmann's message and byte count say where)
    TOO_DEEP,      // a container would open at level max_depth + 1
    DUPLICATE_KEY, // a key repeats in one object
};

// Why a text was refused, in parts, for the caller to word in its own terms.
struct JsonRefusal {
    JsonRefusalKind kind = JsonRefusalKind::SYNTAX;
    // TOO_DEEP: the RFC 6901 pointer of the container that would be too deep ("/id/0/0").
    // DUPLICATE_KEY: the pointer of the object holding the key ("" for the top level).
    std::string pointer;
    std::string key;           // DUPLICATE_KEY: the repeated key, unescaped
    std::size_t read = 0;      // SYNTAX: nlohmann's count of bytes read, the last of them the offending one
    std::string message;       // SYNTAX: nlohmann's exception text
    std::size_t max_depth = 0; // TOO_DEEP: the limit that was passed
};

struct BoundedJson {
    nlohmann::json value; // the document; null when refused
    std::optional<JsonRefusal> refusal;
};

// Parses one JSON document (nothing but whitespace may follow it). Never throws for bad text: a refusal
// comes back in `refusal`. Throws std::bad_alloc only.
BoundedJson parse_bounded_json(std::string_view text, std::size_t max_depth = MAX_JSON_DEPTH);

} // namespace canopy::config
