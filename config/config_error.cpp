#include "config/config_error.h"

#include <utility>

namespace canopy::config {

ConfigError::ConfigError(std::string pointer, const std::string& problem)
    : std::runtime_error(pointer.empty() ? problem : pointer + ": " + problem), pointer_(std::move(pointer)),
      problem_(problem) {}

} // namespace canopy::config
