#pragma once
// What one supervisor runs: its children in order and its supervision settings. Built from the topology
// config (from_config) before the zygote fork, so every child, first start and restart, is forked from
// the same description.
//
// Thread safety: plain values, immutable once the supervisor starts.

#include "config/config.h"
#include "protocol/wire_enum.h"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
#include <spdlog/logger.h>
#include <string>
#include <vector>

namespace canopy::daemon {

// REMOTE: a level-3 node on another host, reached through a link child (daemon/remote_link.h).
enum class ChildKind { SIM_CHIP, CUDA_CHIP, SUB, NODE, REMOTE };
const char* to_string(ChildKind kind) noexcept;

struct SupervisorOptions;

// An arena mapped by the root supervisor before its zygote fork, at the same address in every process
// of the tree below it.
struct ArenaView {
    std::string name;
    Backend backend = Backend::FORK_SHM; // FORK_SHM (shared, writable) or FORK_COW (private, read-only)
    std::uintptr_t base = 0;
    std::size_t length = 0;
};

struct ChildSpec {
    std::string name; // "chip0", "sub1", "node0"
    ChildKind kind = ChildKind::SUB;
    std::uint32_t device = 0;                           // chips
    std::shared_ptr<const SupervisorOptions> node;      // NODE: the nested supervisor's options
    std::shared_ptr<const config::RemoteConfig> remote; // REMOTE: where the node is and how to reach it
};

struct SupervisorOptions {
    std::string name = "local";
    int level = 3;
    std::string path; // this supervisor's path: "/" for the root, "/node0" below it
    std::vector<ChildSpec> children;
    std::filesystem::path state_dir; // journal lives in state_dir / "journal"
    std::uint32_t restart_budget = 5;
    std::chrono::milliseconds backoff_initial{50};
    std::chrono::milliseconds backoff_max{5000};
    std::chrono::milliseconds ready_timeout{30000};
    std::chrono::milliseconds drain_timeout{10000};
    // Test seam: runs first on every child's completion thread, with the child's path (a test delays it to
    // start the thread after the child has already published results).
    std::function<void(const std::string&)> completion_thread_started;
    bool fault_kernels = false;
    // Whether the zygote keeps a standby that replaces it when it dies (without one, a zygote death is fatal).
    bool standby_zygote = true;
    // Where lifecycle events go; empty: the logger registered as "daemon", else nowhere.
    std::shared_ptr<spdlog::logger> log;
    std::vector<config::PreloadConfig> preload; // root only: arenas to map before the zygote fork
    std::vector<ArenaView> arenas;              // every level: the arenas inherited from the root

    // The worker path of child `name` below this supervisor ("/chip0", "/node0/chip1").
    std::string child_path(const std::string& child_name) const;
};

// A copy of `options` in which every level, nested nodes included, lists `arenas`.
SupervisorOptions with_arenas(const SupervisorOptions& options, const std::vector<ArenaView>& arenas);

// Options for the root supervisor of `config`, with `state_dir` overriding config.state_dir when set.
SupervisorOptions from_config(const config::Config& config, const std::filesystem::path& state_dir = {});

} // namespace canopy::daemon
