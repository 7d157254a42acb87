#pragma once
// parse_request: the body of one control frame to the request object handed to the service, read with
// parse_bounded_json (config/bounded_json.h), so that no tree nested deeper than MAX_JSON_DEPTH is ever
// built and no key counts twice. Every refusal is worded for the BAD_REQUEST reply
// (docs/control-protocol.md "Framing").
//
// Thread safety: a pure function.

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace canopy::daemon {

struct ParsedRequest {
    nlohmann::json request; // a JSON object when `error` is empty, null otherwise
    std::string error;      // the BAD_REQUEST message, e.g. "request: duplicate key \"op\" in the top-level object"
};

// Never throws for bad input; throws std::bad_alloc only.
ParsedRequest parse_request(std::string_view body);

} // namespace canopy::daemon
