#pragma once
// Preloaded arenas: the FORK_SHM and FORK_COW backings of the config's `preload` list, mapped by the
// root supervisor before it forks its zygote so that every process of the tree sees each one at the
// same address.
//   fork_cow  the file, mapped private and read-only; consumers get READ only
//   fork_shm  `bytes` of shared anonymous memory, writable, filled from `path` when one is given
//
// Thread safety: map_arenas runs once, single-threaded, before the zygote fork.

#include "config/config.h"
#include "daemon/supervisor_options.h"
#include "ipc/mapped_region.h"

#include <vector>

namespace canopy::daemon {

struct MappedArenas {
    std::vector<ipc::MappedRegion> regions;
    std::vector<ArenaView> views;
};

// Maps every preload entry. Throws std::runtime_error naming the entry and the reason (missing file,
// empty file, mmap failure).
MappedArenas map_arenas(const std::vector<config::PreloadConfig>& preload);

} // namespace canopy::daemon
