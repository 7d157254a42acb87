#pragma once
// Field: one JSON value together with its RFC 6901 pointer in the document, and the typed reads the
// parsers use. Every read checks the JSON type and range and throws ConfigError naming the pointer and
// what was found. ObjectReader: an object whose keys are checked against the schema's list.
//
// A Field refers to a value inside a document it does not own; the document outlives every Field made
// from it. Thread safety: const reads only.

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::config::detail {

// One reference token escaped per RFC 6901: "~" becomes "~0", then "/" becomes "~1".
std::string escape_pointer_token(std::string_view token);

// How a found value is named in a message: "string \"abc\"", "integer 3", "number 1.5", "boolean true",
// "null", "array", "object". Long strings are cut short.
std::string describe_value(const nlohmann::json& value);

// The value alone as JSON text ("3", "\"gpu\""), cut short when long.
std::string quote_value(const nlohmann::json& value);

class Field {
public:
    Field(const nlohmann::json& value, std::string pointer) : value_(&value), pointer_(std::move(pointer)) {}

    const nlohmann::json& value() const noexcept { return *value_; }
    const std::string& pointer() const noexcept { return pointer_; }

    [[noreturn]] void fail(const std::string& problem) const;
    // Throws "expected WHAT, got <describe_value>".
    [[noreturn]] void fail_type(std::string_view what) const;

    // An integer in [min, max]; a float such as 3.0 is not an integer.
    std::int64_t integer(std::int64_t min, std::int64_t max) const;
    std::string string() const;
    bool boolean() const;
    // The index into `names` of the string this field holds.
    std::size_t choice(std::span<const std::string_view> names) const;
    // The elements of an array, each with its own pointer.
    std::vector<Field> elements() const;

private:
    const nlohmann::json* value_;
    std::string pointer_;
};

class ObjectReader {
public:
    // Throws when the field is not an object, or names the first key not in `allowed`, with a
    // "did you mean" hint when an allowed key is close.
    ObjectReader(Field field, std::initializer_list<std::string_view> allowed);

    const Field& field() const noexcept { return field_; }
    std::string pointer_of(std::string_view key) const;
    std::optional<Field> find(std::string_view key) const;
    // Throws "missing required key" at the key's own pointer when the key is absent.
    Field require(std::string_view key) const;

private:
    Field field_;
};

} // namespace canopy::config::detail
