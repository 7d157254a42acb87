// parse_config and load_config: the document's top level, handing each section to its parser.

#include "config/config.h"
#include "config/config_error.h"
#include "config/detail/document.h"
#include "config/detail/read_file.h"
#include "config/detail/sections.h"
#include "config/detail/values.h"

namespace canopy::config {

Config parse_config(std::string_view json_text) {
    const nlohmann::json document = detail::parse_document(json_text);
    const detail::ObjectReader root(detail::Field(document, ""), {"node", "control", "state_dir", "log", "preload",
                                                                  "supervision", "metrics", "testing"});
    Config config;
    config.node = detail::parse_root_node(root.require("node"));
    if (const auto control = root.find("control")) {
        config.control = detail::parse_control(*control);
    }
    if (const auto state_dir = root.find("state_dir")) {
        config.state_dir = detail::read_absolute_path(*state_dir);
    }
    if (const auto log = root.find("log")) {
        config.log = detail::parse_log(*log);
    }
    if (const auto preload = root.find("preload")) {
        config.preload = detail::parse_preloads(*preload);
    }
    if (const auto supervision = root.find("supervision")) {
        config.supervision = detail::parse_supervision(*supervision);
    }
    if (const auto metrics = root.find("metrics")) {
        config.metrics = detail::parse_metrics(*metrics);
    }
    if (const auto testing = root.find("testing")) {
        config.testing = detail::parse_testing(*testing);
    }
    return config;
}

Config load_config(const std::filesystem::path& file) {
    return parse_config(detail::read_config_file(file));
}

} // namespace canopy::config
