#include "config/detail/field.h"

#include "config/config_error.h"
#include "config/suggest.h"

#include <algorithm>
#include <limits>

namespace canopy::config::detail {
namespace {

using nlohmann::json;

constexpr std::size_t MAX_QUOTED_CHARS = 60;

std::string cut_short(std::string text) {
    if (text.size() > MAX_QUOTED_CHARS) {
        text.resize(MAX_QUOTED_CHARS);
        text += "...";
    }
    return text;
}

std::string out_of_range(std::int64_t min, std::int64_t max) {
    return "expected an integer from " + std::to_string(min) + " to " + std::to_string(max);
}

std::string join_choices(std::span<const std::string_view> names) {
    std::string text;
    for (std::size_t i = 0; i < names.size(); ++i) {
        if (i > 0) {
            text += names.size() == 2 ? " or " : ", ";
        }
        text += '"';
        text += names[i];
        text += '"';
    }
    return names.size() > 2 ? "one of " + text : text;
}

} // namespace

std::string escape_pointer_token(std::string_view token) {
    std::string escaped;
    escaped.reserve(token.size());
    for (const char c : token) {
        if (c == '~') {
            escaped += "~0";
        } else if (c == '/') {
            escaped += "~1";
        } else {
            escaped += c;
        }
    }
    return escaped;
}

std::string quote_value(const json& value) {
    return cut_short(value.dump(-1, ' ', true, json::error_handler_t::replace));
}

std::string describe_value(const json& value) {
    switch (value.type()) {
    case json::value_t::null:
        return "null";
    case json::value_t::boolean:
        return "boolean " + quote_value(value);
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
        return "integer " + quote_value(value);
    case json::value_t::number_float:
        return "number " + quote_value(value);
    case json::value_t::string:
        return "string " + quote_value(value);
    case json::value_t::array:
        return "array";
    case json::value_t::object:
        return "object";
    default:
        return "unsupported value";
    }
}

void Field::fail(const std::string& problem) const {
    throw ConfigError(pointer_, problem);
}

void Field::fail_type(std::string_view what) const {
    fail("expected " + std::string(what) + ", got " + describe_value(*value_));
}

std::int64_t Field::integer(std::int64_t min, std::int64_t max) const {
    if (value_->is_number_unsigned()) {
        const auto v = value_->get<std::uint64_t>();
        if (v > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()) ||
            static_cast<std::int64_t>(v) < min || static_cast<std::int64_t>(v) > max) {
            fail(out_of_range(min, max) + ", got " + quote_value(*value_));
        }
        return static_cast<std::int64_t>(v);
    }
    if (value_->is_number_integer()) {
        const auto v = value_->get<std::int64_t>();
        if (v < min || v > max) {
            fail(out_of_range(min, max) + ", got " + quote_value(*value_));
        }
        return v;
    }
    fail_type("an integer");
}

std::string Field::string() const {
    if (!value_->is_string()) {
        fail_type("a string");
    }
    return value_->get<std::string>();
}

bool Field::boolean() const {
    if (!value_->is_boolean()) {
        fail_type("a boolean");
    }
    return value_->get<bool>();
}

std::size_t Field::choice(std::span<const std::string_view> names) const {
    if (value_->is_string()) {
        const auto& text = value_->get_ref<const std::string&>();
        for (std::size_t i = 0; i < names.size(); ++i) {
            if (names[i] == text) {
                return i;
            }
        }
        fail("expected " + join_choices(names) + ", got " + quote_value(*value_));
    }
    fail("expected " + join_choices(names) + ", got " + describe_value(*value_));
}

std::vector<Field> Field::elements() const {
    if (!value_->is_array()) {
        fail_type("an array");
    }
    std::vector<Field> fields;
    fields.reserve(value_->size());
    for (std::size_t i = 0; i < value_->size(); ++i) {
        fields.emplace_back((*value_)[i], pointer_ + "/" + std::to_string(i));
    }
    return fields;
}

ObjectReader::ObjectReader(Field field, std::initializer_list<std::string_view> allowed) : field_(std::move(field)) {
    if (!field_.value().is_object()) {
        field_.fail_type("an object");
    }
    for (const auto& [key, value] : field_.value().items()) {
        if (std::find(allowed.begin(), allowed.end(), key) != allowed.end()) {
            continue;
        }
        std::string problem = "unknown key " + quote_value(json(key));
        if (const auto hint = closest_match(key, std::span<const std::string_view>(allowed.begin(), allowed.size()))) {
            problem += " (did you mean \"" + std::string(*hint) + "\"?)";
        }
        throw ConfigError(pointer_of(key), problem);
    }
}

std::string ObjectReader::pointer_of(std::string_view key) const {
    return field_.pointer() + "/" + escape_pointer_token(key);
}

std::optional<Field> ObjectReader::find(std::string_view key) const {
    const auto it = field_.value().find(key);
    if (it == field_.value().end()) {
        return std::nullopt;
    }
    return Field(*it, pointer_of(key));
}

Field ObjectReader::require(std::string_view key) const {
    auto found = find(key);
    if (!found) {
        throw ConfigError(pointer_of(key), "missing required key \"" + std::string(key) + "\"");
    }
    return *found;
}

} // namespace canopy::config::detail
