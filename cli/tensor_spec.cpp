#include "cli/tensor_spec.h"

#include "cli/cli_error.h"
#include "cli/units.h"
#include "protocol/tensor.h"
#include "protocol/wire_enum.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

namespace canopy::cli {

namespace {

using nlohmann::json;

std::vector<std::string_view> split(std::string_view text, char sep) {
    std::vector<std::string_view> parts;
    std::size_t start = 0;
    for (std::size_t i = 0; i <= text.size(); ++i) {
        if (i == text.size() || text[i] == sep) {
            parts.push_back(text.substr(start, i - start));
            start = i + 1;
        }
    }
    return parts;
}

bool is_dtype_name(std::string_view name) {
    for (auto raw = static_cast<std::uint8_t>(DataType::FLOAT32); raw <= static_cast<std::uint8_t>(DataType::INT64);
         ++raw) {
        if (name == to_string(static_cast<DataType>(raw))) {
            return true;
        }
    }
    return false;
}

// Parses "AxBxC" into 1..MAX_DIMS values in [1, UINT32_MAX]; `field` names the part ("SHAPE").
json parse_dims(std::string_view text, std::string_view field, const std::string& what) {
    const auto parts = split(text, 'x');
    if (parts.size() > MAX_DIMS) {
        throw usage_error(what + std::string(field) + " has " + std::to_string(parts.size()) + " extents, at most " +
                          std::to_string(MAX_DIMS));
    }
    json dims = json::array();
    for (std::string_view part : parts) {
        std::uint32_t v = 0;
        const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
        if (part.empty() || ec != std::errc() || end != part.data() + part.size() || v == 0) {
            throw usage_error(what + std::string(field) + " \"" + std::string(text) +
                              "\": expected integers from 1 to 4294967295 joined by 'x' (e.g. 64x64)");
        }
        dims.push_back(v);
    }
    return dims;
}

json parse_number(std::string_view type, std::string_view value, const std::string& what) {
    if (type == "int64") {
        std::int64_t v = 0;
        const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
        if (value.empty() || ec != std::errc() || end != value.data() + value.size()) {
            throw usage_error(what + "expected an integer in the int64 range");
        }
        return v;
    }
    double v = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), v);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size() || !std::isfinite(v)) {
        throw usage_error(what + "expected a finite decimal number");
    }
    if (type == "float32" && std::abs(v) > static_cast<double>(std::numeric_limits<float>::max())) {
        throw usage_error(what + "out of the float32 range");
    }
    return v;
}

} // namespace

json parse_tensor_spec(std::string_view spec, std::string_view option) {
    const std::string what = std::string(option) + " \"" + std::string(spec) + "\": ";
    const auto parts = split(spec, ':');
    if (parts.size() < 3 || parts.size() > 5) {
        throw usage_error(what + "expected BUFFER_ID:DTYPE:SHAPE[:STRIDES[:OFFSET]], got " +
                          std::to_string(parts.size()) + " field" + (parts.size() == 1 ? "" : "s"));
    }
    if (parts[0].empty()) {
        throw usage_error(what + "BUFFER_ID is empty");
    }
    if (!is_dtype_name(parts[1])) {
        throw usage_error(what + "unknown DTYPE \"" + std::string(parts[1]) +
                          "\" (float32 float16 bfloat16 float64 int8 uint8 int16 int32 int64)");
    }
    json tensor = {{"buffer", std::string(parts[0])},
                   {"dtype", std::string(parts[1])},
                   {"shape", parse_dims(parts[2], "SHAPE", what)}};
    if (parts.size() >= 4 && !parts[3].empty()) {
        json strides = parse_dims(parts[3], "STRIDES", what);
        if (strides.size() != tensor["shape"].size()) {
            throw usage_error(what + "STRIDES has " + std::to_string(strides.size()) + " values, SHAPE has " +
                              std::to_string(tensor["shape"].size()));
        }
        tensor["strides"] = std::move(strides);
    }
    if (parts.size() == 5) {
        tensor["byte_offset"] = parse_byte_size(parts[4], what + "OFFSET");
    }
    return tensor;
}

json parse_scalar(std::string_view text, std::string_view option) {
    const std::string what = std::string(option) + " \"" + std::string(text) + "\": ";
    const std::size_t colon = text.find(':');
    if (colon == std::string_view::npos) {
        throw usage_error(what + "expected TYPE:VALUE with TYPE float32, float64 or int64");
    }
    const std::string_view type = text.substr(0, colon);
    if (type != "float32" && type != "float64" && type != "int64") {
        throw usage_error(what + "unknown scalar TYPE \"" + std::string(type) + "\" (float32, float64 or int64)");
    }
    return {{std::string(type), parse_number(type, text.substr(colon + 1), what)}};
}

} // namespace canopy::cli
