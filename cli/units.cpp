#include "cli/units.h"

#include "cli/cli_error.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>

namespace canopy::cli {

namespace {

// log2 of the multiplier a suffix stands for; -1 when `suffix` is not a size suffix.
int suffix_shift(std::string_view suffix) {
    if (suffix.empty()) {
        return 0;
    }
    std::string lower;
    for (char c : suffix) {
        lower += static_cast<char>(c >= 'A' && c <= 'Z' ? c - 'A' + 'a' : c);
    }
    static constexpr std::array<std::string_view, 4> UNITS = {"k", "m", "g", "t"};
    for (std::size_t i = 0; i < UNITS.size(); ++i) {
        if (lower == UNITS[i] || lower == std::string(UNITS[i]) + "ib" || lower == std::string(UNITS[i]) + "b") {
            return static_cast<int>(10 * (i + 1));
        }
    }
    return -1;
}

std::string printf_string(const char* format, double value) {
    std::array<char, 64> buf{};
    const int n = std::snprintf(buf.data(), buf.size(), format, value);
    return std::string(buf.data(), n > 0 ? static_cast<std::size_t>(n) : 0);
}

std::string two_digits(std::uint64_t v) {
    return (v < 10 ? "0" : "") + std::to_string(v);
}

} // namespace

std::uint64_t parse_byte_size(std::string_view text, std::string_view option) {
    const std::string what = std::string(option) + " \"" + std::string(text) + "\": ";
    std::uint64_t value = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
    if (end == text.data()) {
        throw usage_error(what + "expected a byte count: an integer, optionally with K, M, G or T (KiB...)");
    }
    if (ec == std::errc::result_out_of_range) {
        throw usage_error(what + "too large");
    }
    const std::string_view suffix = text.substr(static_cast<std::size_t>(end - text.data()));
    const int shift = suffix_shift(suffix);
    if (shift < 0) {
        throw usage_error(what + "unknown size suffix \"" + std::string(suffix) + "\" (use K, M, G or T)");
    }
    if (shift > 0 && value > (UINT64_MAX >> shift)) {
        throw usage_error(what + "too large");
    }
    return value << shift;
}

std::string format_bytes(std::uint64_t n) {
    static constexpr std::array<const char*, 6> UNITS = {"KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
    if (n < 1024) {
        return std::to_string(n) + " B";
    }
    double value = static_cast<double>(n) / 1024.0;
    std::size_t unit = 0;
    while (value >= 1023.95 && unit + 1 < UNITS.size()) {
        value /= 1024.0;
        ++unit;
    }
    return printf_string("%.1f ", value) + UNITS[unit];
}

std::string format_uptime(double seconds) {
    if (!std::isfinite(seconds) || seconds < 0) {
        return "-";
    }
    const auto s = static_cast<std::uint64_t>(seconds);
    if (s < 60) {
        return std::to_string(s) + "s";
    }
    if (s < 3600) {
        return std::to_string(s / 60) + "m" + two_digits(s % 60) + "s";
    }
    if (s < 86400) {
        return std::to_string(s / 3600) + "h" + two_digits(s / 60 % 60) + "m";
    }
    return std::to_string(s / 86400) + "d" + two_digits(s / 3600 % 24) + "h";
}

std::string format_elapsed_ns(std::uint64_t ns) {
    if (ns < 1000) {
        return std::to_string(ns) + "ns";
    }
    const double v = static_cast<double>(ns);
    if (ns < 1'000'000) {
        return std::to_string(ns / 1000) + "us";
    }
    if (ns < 10'000'000) {
        return printf_string("%.1fms", v / 1e6);
    }
    if (ns < 1'000'000'000) {
        return std::to_string(ns / 1'000'000) + "ms";
    }
    if (ns < 60'000'000'000) {
        return printf_string("%.2fs", v / 1e9);
    }
    return format_uptime(v / 1e9);
}

std::uint64_t parse_duration_ms(std::string_view text, std::string_view option) {
    const auto bad = [&](const std::string& why) {
        return usage_error(std::string(option) + " \"" + std::string(text) + "\": " + why);
    };
    std::size_t digits = 0;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') {
        ++digits;
    }
    if (digits == 0 || digits > 9) {
        throw bad("expected a whole number with a unit: 500ms, 30s, 5m, 2h");
    }
    std::uint64_t n = 0;
    for (std::size_t i = 0; i < digits; ++i) {
        n = n * 10 + static_cast<std::uint64_t>(text[i] - '0');
    }
    const std::string_view unit = text.substr(digits);
    std::uint64_t scale = 0;
    if (unit == "ms") {
        scale = 1;
    } else if (unit.empty() || unit == "s") {
        scale = 1000;
    } else if (unit == "m") {
        scale = 60'000;
    } else if (unit == "h") {
        scale = 3'600'000;
    } else {
        throw bad("unknown unit \"" + std::string(unit) + "\" (ms, s, m or h)");
    }
    constexpr std::uint64_t DAY_MS = 86'400'000;
    if (n > DAY_MS / scale) {
        throw bad("at most a day");
    }
    return n * scale;
}

} // namespace canopy::cli
