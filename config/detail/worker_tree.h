#pragma once
// The worker tree of a node in the one order every listing uses: chips, then subs, then each nested node
// followed by its own workers. A remote nested node is listed alone: its workers are in its host's config.
//
// Entries point into the NodeConfig they were listed from, which outlives them.
// Thread safety: pure functions.

#include "config/config.h"

#include <string>
#include <vector>

namespace canopy::config::detail {

struct WorkerEntry {
    std::string path;                 // "/chip0", "/node0", "/node0/sub1"
    const ChipConfig* chip = nullptr; // set for a chip
    const NodeConfig* node = nullptr; // set for a nested node's supervisor, local or remote
    bool is_sub() const noexcept { return chip == nullptr && node == nullptr; }
};

// Every worker below `node` (not `node` itself), with paths under `prefix` ("" for the root).
std::vector<WorkerEntry> list_workers(const NodeConfig& node, const std::string& prefix = "");

} // namespace canopy::config::detail
