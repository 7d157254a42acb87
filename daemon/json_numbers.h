#pragma once
// Typed reads of the numbers in a control request. Each takes the value a client sent and either returns
// it as the target type holds it, or throws RequestError(BAD_REQUEST) whose message names the field
// (`where`) and the value as read; nothing is wrapped, saturated or cast silently.
//
// An integer field takes a JSON integer only: 2.0 and 1e3 are floats and are refused. nlohmann reads an
// integer literal beyond 64 bits as a float, so a float with no fraction outside the field's range is
// reported as out of range, quoted as nlohmann holds it (1.8446744073709552e+19). The messages:
//   "WHERE: expected an integer, got VALUE"       a non-number, a float with a fraction, or one in range
//   "WHERE: VALUE is out of range MIN..MAX"       an unsigned field given a value outside MIN..MAX
//   "WHERE: VALUE is out of range for int64"      an int64 scalar given a value outside int64
//   "WHERE: VALUE is out of range for float32"    a float32 scalar whose magnitude rounds past FLT_MAX
//   "WHERE: expected a number, got VALUE"         a float scalar given a non-number
// VALUE is the value's JSON text, cut to 40 characters.
//
// Thread safety: pure functions.

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

namespace canopy::daemon {

// An integer in [min, max].
std::uint64_t read_unsigned(const nlohmann::json& value, const std::string& where, std::uint64_t min,
                            std::uint64_t max);
// An integer in [INT64_MIN, INT64_MAX].
std::int64_t read_int64(const nlohmann::json& value, const std::string& where);
// Any number whose magnitude is below 2^128 - 2^103, rounded to the nearest float (FLT_MAX at most). A
// larger magnitude would round to infinity and is out of range.
float read_float32(const nlohmann::json& value, const std::string& where);
// Any number (JSON text cannot spell one beyond double's range: the parser refuses it as a syntax error).
double read_float64(const nlohmann::json& value, const std::string& where);

} // namespace canopy::daemon
