// to_json: the inverse of parse_config.

#include "config/to_json.h"

namespace canopy::config {
namespace {

using nlohmann::json;

json tls_json(const TlsConfig& tls) {
    if (tls.insecure) {
        return "insecure";
    }
    return {
        {"ca", tls.ca.string()}, {"cert", tls.cert.string()}, {"key", tls.key.string()}, {"peer_name", tls.peer_name}};
}

// A remote node has only the keys that say how to reach it.
json remote_node_json(const std::string& name, const RemoteConfig& remote) {
    return {{"name", name},
            {"remote", to_string(remote.address)},
            {"tls", tls_json(remote.tls)},
            {"lost_after_ms", remote.lost_after.count()}};
}

json node_json(const NodeConfig& node) {
    if (node.remote) {
        return remote_node_json(node.name, *node.remote);
    }
    json chips = json::array();
    for (const ChipConfig& chip : node.chips) {
        chips.push_back({{"device", chip.device}, {"backend", to_string(chip.backend)}});
    }
    json nodes = json::array();
    for (const NodeConfig& nested : node.nodes) {
        nodes.push_back(node_json(nested));
    }
    return {{"name", node.name}, {"level", node.level}, {"chips", chips}, {"subs", node.subs}, {"nodes", nodes}};
}

json control_json(const ControlConfig& control) {
    return {{"socket", control.socket.string()},
            {"allow_uids", control.allow_uids},
            {"allow_gids", control.allow_gids},
            {"admin_uids", control.admin_uids},
            {"admin_gids", control.admin_gids},
            {"max_frame_bytes", control.max_frame_bytes},
            {"task_history", control.task_history},
            {"max_connections", control.max_connections},
            {"frame_timeout_ms", control.frame_timeout.count()},
            {"idle_timeout_ms", control.idle_timeout.count()},
            {"max_queued_reply_bytes", control.max_queued_reply_bytes},
            {"max_attachment_bytes", control.max_attachment_bytes}};
}

json preload_json(const PreloadConfig& preload) {
    json entry = {{"name", preload.name}, {"backend", to_string(preload.backend)}};
    if (preload.path) {
        entry["path"] = preload.path->string();
    }
    if (preload.backend == PreloadBackend::FORK_SHM) {
        entry["bytes"] = preload.bytes;
    }
    return entry;
}

json supervision_json(const SupervisionConfig& supervision) {
    return {{"restart_budget", supervision.restart_budget},
            {"backoff_initial_ms", supervision.backoff_initial.count()},
            {"backoff_max_ms", supervision.backoff_max.count()},
            {"drain_timeout_ms", supervision.drain_timeout.count()},
            {"task_timeout_ms", supervision.task_timeout.count()}};
}

} // namespace

json to_json(const Config& config) {
    json preloads = json::array();
    for (const PreloadConfig& preload : config.preload) {
        preloads.push_back(preload_json(preload));
    }
    json metrics = {{"max_connections", config.metrics.max_connections},
                    {"timeout_ms", config.metrics.timeout.count()}};
    if (config.metrics.listen) {
        metrics["listen"] = to_string(*config.metrics.listen);
    }
    json document = {
        {"node", node_json(config.node)},
        {"control", control_json(config.control)},
        {"state_dir", config.state_dir.string()},
        {"log", {{"level", to_string(config.log.level)}, {"format", to_string(config.log.format)}}},
        {"preload", preloads},
        {"supervision", supervision_json(config.supervision)},
        {"metrics", metrics},
        {"testing",
         {{"fault_kernels", config.testing.fault_kernels}, {"insecure_peers", config.testing.insecure_peers}}}};
    if (config.serve) {
        document["serve"] = {{"listen", to_string(config.serve->listen)},
                             {"tls", tls_json(config.serve->tls)},
                             {"lost_after_ms", config.serve->lost_after.count()}};
    }
    return document;
}

} // namespace canopy::config
