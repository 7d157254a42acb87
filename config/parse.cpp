// parse_config and load_config: the document's top level, handing each section to its parser.

#include "config/config.h"
#include "config/config_error.h"
#include "config/detail/document.h"
#include "config/detail/read_file.h"
#include "config/detail/sections.h"
#include "config/detail/values.h"

namespace canopy::config {
namespace {

// A level-4 node is not served to another: "serve" is refused whole before its contents are read.
ServeConfig parse_served(const detail::Field& field, const NodeConfig& node) {
    if (node.level != 3) {
        field.fail("a level-4 node is not served to another; \"serve\" needs a level-3 node, got level " +
                   std::to_string(node.level));
    }
    return detail::parse_serve(field);
}

// "tls": "insecure" needs a loopback address unless testing.insecure_peers allows any. Checked once every
// section is read, since "testing" may come last.
void check_insecure(const TlsConfig& tls, const NetAddress& address, const std::string& tls_pointer,
                    const Config& config) {
    if (tls.insecure && !config.testing.insecure_peers && !is_loopback_host(address.host)) {
        throw ConfigError(tls_pointer, R"("tls": "insecure" needs a loopback address or "testing": )"
                                       R"({"insecure_peers": true}, got )" +
                                           address.host);
    }
}

void check_insecure_links(const Config& config) {
    for (std::size_t i = 0; i < config.node.nodes.size(); ++i) {
        const NodeConfig& nested = config.node.nodes[i];
        if (nested.remote) {
            check_insecure(nested.remote->tls, nested.remote->address, "/node/nodes/" + std::to_string(i) + "/tls",
                           config);
        }
    }
    if (config.serve) {
        check_insecure(config.serve->tls, config.serve->listen, "/serve/tls", config);
    }
}

} // namespace

Config parse_config(std::string_view json_text) {
    const nlohmann::json document = detail::parse_document(json_text);
    const detail::ObjectReader root(detail::Field(document, ""), {"node", "control", "state_dir", "log", "preload",
                                                                  "supervision", "metrics", "serve", "testing"});
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
    if (const auto serve = root.find("serve")) {
        config.serve = parse_served(*serve, config.node);
    }
    if (const auto testing = root.find("testing")) {
        config.testing = detail::parse_testing(*testing);
    }
    check_insecure_links(config);
    return config;
}

Config load_config(const std::filesystem::path& file) {
    return parse_config(detail::read_config_file(file));
}

} // namespace canopy::config
