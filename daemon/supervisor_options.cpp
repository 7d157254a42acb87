#include "daemon/supervisor_options.h"

namespace canopy::daemon {
namespace {

SupervisorOptions node_options(const config::NodeConfig& node, const std::string& path,
                               const std::filesystem::path& state_dir, const config::Config& config) {
    SupervisorOptions o;
    o.name = node.name;
    o.level = node.level;
    o.path = path;
    o.state_dir = state_dir;
    o.restart_budget = config.supervision.restart_budget;
    o.backoff_initial = config.supervision.backoff_initial;
    o.backoff_max = config.supervision.backoff_max;
    o.drain_timeout = config.supervision.drain_timeout;
    o.fault_kernels = config.testing.fault_kernels;
    for (std::size_t i = 0; i < node.chips.size(); ++i) {
        const auto& chip = node.chips[i];
        o.children.push_back({"chip" + std::to_string(i),
                              chip.backend == config::ChipBackend::CUDA ? ChildKind::CUDA_CHIP : ChildKind::SIM_CHIP,
                              chip.device, nullptr, nullptr});
    }
    for (std::uint32_t i = 0; i < node.subs; ++i) {
        o.children.push_back({"sub" + std::to_string(i), ChildKind::SUB, 0, nullptr, nullptr});
    }
    for (const auto& nested : node.nodes) {
        if (nested.remote) {
            ChildSpec spec{nested.name, ChildKind::REMOTE, 0, nullptr, nullptr};
            spec.remote = std::make_shared<const config::RemoteConfig>(*nested.remote);
            o.children.push_back(std::move(spec));
            continue;
        }
        ChildSpec spec{nested.name, ChildKind::NODE, 0, nullptr, nullptr};
        spec.node = std::make_shared<const SupervisorOptions>(
            node_options(nested, o.child_path(nested.name), state_dir / "nodes" / nested.name, config));
        o.children.push_back(std::move(spec));
    }
    return o;
}

} // namespace

const char* to_string(ChildKind kind) noexcept {
    switch (kind) {
    case ChildKind::SIM_CHIP:
    case ChildKind::CUDA_CHIP:
        return "chip";
    case ChildKind::SUB:
        return "sub";
    case ChildKind::NODE:
        return "node";
    case ChildKind::REMOTE:
        return "remote";
    }
    return "unknown";
}

std::string SupervisorOptions::child_path(const std::string& child_name) const {
    return (path.empty() || path == "/" ? std::string("/") : path + "/") + child_name;
}

SupervisorOptions from_config(const config::Config& config, const std::filesystem::path& state_dir) {
    SupervisorOptions o = node_options(config.node, "/", state_dir.empty() ? config.state_dir : state_dir, config);
    o.preload = config.preload;
    return o;
}

SupervisorOptions with_arenas(const SupervisorOptions& options, const std::vector<ArenaView>& arenas) {
    SupervisorOptions o = options;
    o.arenas = arenas;
    for (ChildSpec& child : o.children) {
        if (child.node) {
            child.node = std::make_shared<const SupervisorOptions>(with_arenas(*child.node, arenas));
        }
    }
    return o;
}

} // namespace canopy::daemon
