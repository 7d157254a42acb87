#include "config/detail/document.h"

#include "config/config_error.h"
#include "config/detail/field.h"

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace canopy::config::detail {
namespace {

using nlohmann::json;

// A SAX pass that builds nothing: it tracks the pointer of the value being read, stops at the first
// repeated key, and records where a syntax error is.
class DocumentChecker : public nlohmann::json_sax<json> {
public:
    // Set when a key repeats; the parse stops there.
    std::optional<ConfigError> repeated_key;
    // Set on a syntax error: nlohmann's count of bytes read, and its message.
    std::optional<std::size_t> syntax_error_position;
    std::string syntax_error_message;

    bool null() override { return value(); }
    bool boolean(bool) override { return value(); }
    bool number_integer(number_integer_t) override { return value(); }
    bool number_unsigned(number_unsigned_t) override { return value(); }
    bool number_float(number_float_t, const string_t&) override { return value(); }
    bool string(string_t&) override { return value(); }
    bool binary(binary_t&) override { return value(); }
    bool start_object(std::size_t) override { return open(true); }
    bool end_object() override { return close(); }
    bool start_array(std::size_t) override { return open(false); }
    bool end_array() override { return close(); }

    bool key(string_t& key) override {
        Container& object = stack_.back();
        if (!object.keys.insert(key).second) {
            repeated_key.emplace(pointer() + "/" + escape_pointer_token(key),
                                 "duplicate key " + quote_value(json(key)));
            return false;
        }
        object.next_token = escape_pointer_token(key);
        return true;
    }

    bool parse_error(std::size_t position, const std::string&, const nlohmann::json::exception& ex) override {
        syntax_error_position = position;
        syntax_error_message = ex.what();
        return false;
    }

private:
    struct Container {
        bool is_object = false;
        std::string token; // this container's reference token in its parent; "" for the document
        std::set<std::string> keys;
        std::size_t next_index = 0;
        std::string next_token;
    };

    // The token the next value takes in the innermost container.
    std::string advance() {
        if (stack_.empty()) {
            return "";
        }
        Container& top = stack_.back();
        return top.is_object ? top.next_token : std::to_string(top.next_index++);
    }

    bool value() {
        advance();
        return true;
    }

    bool open(bool is_object) {
        Container container;
        container.is_object = is_object;
        container.token = advance();
        stack_.push_back(std::move(container));
        return true;
    }

    bool close() {
        stack_.pop_back();
        return true;
    }

    std::string pointer() const {
        std::string text;
        for (std::size_t i = 1; i < stack_.size(); ++i) {
            text += "/" + stack_[i].token;
        }
        return text;
    }

    std::vector<Container> stack_;
};

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
    DocumentChecker checker;
    if (!json::sax_parse(text, &checker)) {
        if (checker.repeated_key) {
            throw std::move(*checker.repeated_key);
        }
        // nlohmann reports the count of bytes read, the last of them the offending one.
        const std::size_t read = checker.syntax_error_position.value_or(0);
        const TextPosition at = position_of(text, read > 0 ? read - 1 : 0);
        throw ConfigError("", "line " + std::to_string(at.line) + ", column " + std::to_string(at.column) + ": " +
                                  syntax_problem(checker.syntax_error_message));
    }
    return json::parse(text);
}

} // namespace canopy::config::detail
