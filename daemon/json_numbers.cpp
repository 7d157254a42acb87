#include "daemon/json_numbers.h"

#include "daemon/request_error.h"
#include "daemon/supervisor.h"

#include <cmath>
#include <limits>
#include <optional>

namespace canopy::daemon {
namespace {

using nlohmann::json;

// A value quoted in a message is cut to this many characters.
constexpr std::size_t MAX_QUOTED_CHARS = 40;

// The magnitude from which a double rounds to infinity as a float: FLT_MAX plus half of its ulp (a tie
// rounds to the even neighbour, which is infinity).
constexpr double FLOAT32_OVERFLOW = 0x1.ffffffp127;

std::string quoted(const json& value) {
    std::string text = value.dump(-1, ' ', false, json::error_handler_t::replace);
    if (text.size() > MAX_QUOTED_CHARS) {
        text.resize(MAX_QUOTED_CHARS);
        text += "...";
    }
    return text;
}

// The value of a float with no fraction, which may be an integer literal the client meant: nlohmann reads an
// integer beyond 64 bits as a float.
std::optional<double> integral_float(const json& value) {
    if (!value.is_number_float() || std::trunc(value.get<double>()) != value.get<double>()) {
        return std::nullopt;
    }
    return value.get<double>();
}

} // namespace

std::uint64_t read_unsigned(const json& value, const std::string& where, std::uint64_t min, std::uint64_t max) {
    const std::string out_of_range = " is out of range " + std::to_string(min) + ".." + std::to_string(max);
    // max + 1 rounds to 2^64 for UINT64_MAX, which is the end wanted.
    const auto whole = integral_float(value);
    if (whole && (*whole < static_cast<double>(min) || *whole >= static_cast<double>(max) + 1.0)) {
        bad_request(where + ": " + quoted(value) + out_of_range);
    }
    if (!value.is_number_integer()) {
        bad_request(where + ": expected an integer, got " + quoted(value));
    }
    // nlohmann reads every integer literal >= 0 as unsigned except "-0", which is signed zero.
    const bool negative = !value.is_number_unsigned() && value.get<std::int64_t>() < 0;
    if (negative || value.get<std::uint64_t>() < min || value.get<std::uint64_t>() > max) {
        bad_request(where + ": " + quoted(value) + out_of_range);
    }
    return value.get<std::uint64_t>();
}

std::int64_t read_int64(const json& value, const std::string& where) {
    const std::string out_of_range = " is out of range for int64";
    // Every integer literal below INT64_MIN reads as a float of -2^63 or less.
    const auto whole = integral_float(value);
    if (whole && (*whole <= -0x1p63 || *whole >= 0x1p63)) {
        bad_request(where + ": " + quoted(value) + out_of_range);
    }
    if (!value.is_number_integer()) {
        bad_request(where + ": expected an integer, got " + quoted(value));
    }
    if (value.is_number_unsigned() &&
        value.get<std::uint64_t>() > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max())) {
        bad_request(where + ": " + quoted(value) + out_of_range);
    }
    return value.get<std::int64_t>();
}

float read_float32(const json& value, const std::string& where) {
    if (!value.is_number()) {
        bad_request(where + ": expected a number, got " + quoted(value));
    }
    const double d = value.get<double>();
    if (std::fabs(d) >= FLOAT32_OVERFLOW) {
        bad_request(where + ": " + quoted(value) + " is out of range for float32");
    }
    return static_cast<float>(d);
}

double read_float64(const json& value, const std::string& where) {
    if (!value.is_number()) {
        bad_request(where + ": expected a number, got " + quoted(value));
    }
    return value.get<double>();
}

} // namespace canopy::daemon
