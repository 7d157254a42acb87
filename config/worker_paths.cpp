// The worker tree: paths of every worker below a node, in tree order.

#include "config/config.h"
#include "config/detail/worker_tree.h"

namespace canopy::config {
namespace detail {
namespace {

void append_workers(const NodeConfig& node, const std::string& prefix, std::vector<WorkerEntry>& entries) {
    for (std::size_t i = 0; i < node.chips.size(); ++i) {
        entries.push_back({prefix + "/chip" + std::to_string(i), &node.chips[i], nullptr});
    }
    for (std::uint32_t i = 0; i < node.subs; ++i) {
        entries.push_back({prefix + "/sub" + std::to_string(i), nullptr, nullptr});
    }
    for (const NodeConfig& nested : node.nodes) {
        const std::string path = prefix + "/" + nested.name;
        entries.push_back({path, nullptr, &nested});
        append_workers(nested, path, entries);
    }
}

} // namespace

std::vector<WorkerEntry> list_workers(const NodeConfig& node, const std::string& prefix) {
    std::vector<WorkerEntry> entries;
    append_workers(node, prefix, entries);
    return entries;
}

} // namespace detail

std::vector<std::string> worker_paths(const NodeConfig& node) {
    std::vector<std::string> paths;
    for (detail::WorkerEntry& entry : detail::list_workers(node)) {
        paths.push_back(std::move(entry.path));
    }
    return paths;
}

} // namespace canopy::config
