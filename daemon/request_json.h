#pragma once
// parse_request: the body of one control frame to the request object handed to the service, read with
// parse_bounded_json (config/bounded_json.h), so that no tree nested deeper than MAX_JSON_DEPTH is ever
// built and no key counts twice. Every refusal is worded for the BAD_REQUEST reply
// (docs/control-protocol.md "Framing"). A run or submit request of the plain form clients write is read by
// scan_run_request instead (daemon/run_request.h), without a tree of its tasks.
//
// Thread safety: safe to call from any thread.

#include "daemon/run_request.h"

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace canopy::daemon {

struct ParsedRequest {
    nlohmann::json request; // a JSON object when `error` is empty, null otherwise
    std::string error;      // the BAD_REQUEST message, e.g. "request: duplicate key \"op\" in the top-level object"
    // A run or submit request scan_run_request read: `request` then holds only its "op", "id", "wait" and
    // "progress", and the tasks are here.
    std::unique_ptr<RawRun> run;
};

// Never throws for bad input; throws std::bad_alloc only.
ParsedRequest parse_request(std::string_view body);

} // namespace canopy::daemon
