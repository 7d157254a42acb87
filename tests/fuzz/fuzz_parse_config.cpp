// libFuzzer target: the topology config parser (config/) on arbitrary bytes, the boundary where an operator's
// file becomes the daemon's topology. Invariants: parse_config either throws ConfigError or returns a Config
// that survives the round trip through to_json unchanged.
#include "config/config.h"
#include "config/config_error.h"
#include "config/to_json.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    canopy::config::Config parsed;
    try {
        parsed = canopy::config::parse_config(text);
    } catch (const canopy::config::ConfigError&) {
        return 0;
    }
    try {
        if (!(canopy::config::parse_config(canopy::config::to_json(parsed).dump()) == parsed)) {
            std::abort();
        }
    } catch (const canopy::config::ConfigError&) {
        std::abort(); // what to_json writes must parse
    }
    return 0;
}
