#pragma once
// to_json: a Config as the JSON document parse_config reads, with every key written out, except "serve" and
// metrics.listen when they are not set and the keys a remote node does not take.
//
// For every Config that parse_config, load_config or default_config returns,
// parse_config(to_json(c).dump()) == c.
//
// Thread safety: pure function.

#include "config/config.h"

#include <nlohmann/json.hpp>

namespace canopy::config {

nlohmann::json to_json(const Config& config);

} // namespace canopy::config
