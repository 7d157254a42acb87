#pragma once
// ConfigError: the one exception every config entry point throws for a bad config.
//
// what() is "POINTER: PROBLEM" where POINTER is the RFC 6901 JSON pointer of the offending field
// ("/node/chips/1/backend") and PROBLEM says what was expected and what was found. When the pointer is
// "" (the whole document: a syntax error, an unreadable file) what() is PROBLEM alone.
//
// Thread safety: immutable after construction.

#include <stdexcept>
#include <string>

namespace canopy::config {

class ConfigError : public std::runtime_error {
public:
    ConfigError(std::string pointer, const std::string& problem);

    // The JSON pointer of the offending field; "" for the whole document.
    const std::string& pointer() const noexcept { return pointer_; }
    // The PROBLEM part of what(), without the pointer.
    const std::string& problem() const noexcept { return problem_; }

private:
    std::string pointer_;
    std::string problem_;
};

} // namespace canopy::config
