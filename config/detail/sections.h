#pragma once
// One parser per section of the config document. Each takes the section's Field, applies every rule of
// docs/config.md to it and returns the section's value, or throws ConfigError at the first offending
// field.
//
// Thread safety: pure functions.

#include "config/config.h"
#include "config/detail/field.h"

#include <vector>

namespace canopy::config::detail {

// The root "node" object: level 3 or 4, name "local" when omitted.
NodeConfig parse_root_node(const Field& field);
ControlConfig parse_control(const Field& field);
LogConfig parse_log(const Field& field);
std::vector<PreloadConfig> parse_preloads(const Field& field);
SupervisionConfig parse_supervision(const Field& field);
MetricsConfig parse_metrics(const Field& field);
// The "serve" object alone; whether the node may be served is the caller's check.
ServeConfig parse_serve(const Field& field);
TestingConfig parse_testing(const Field& field);

} // namespace canopy::config::detail
