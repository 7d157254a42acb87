// default_config: the configuration of a daemon started without one.

#include "config/config.h"
#include "protocol/descriptor.h"

#include <algorithm>
#include <charconv>
#include <system_error>

namespace canopy::config {
namespace {

constexpr std::string_view GPU_NODE_PREFIX = "nvidia";
constexpr std::uint32_t DEFAULT_SUBS = 2;

// True for "nvidia<N>" with N canonical decimal digits (no sign, no leading zero) below MAX_DEVICE_ORDINAL;
// false for every other name ("nvidiactl", "nvidia-uvm", "nvidia01").
bool is_gpu_node(std::string_view name) {
    if (!name.starts_with(GPU_NODE_PREFIX)) {
        return false;
    }
    const std::string_view digits = name.substr(GPU_NODE_PREFIX.size());
    const bool canonical = !digits.empty() && (digits == "0" || digits.front() != '0') &&
                           std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; });
    std::uint32_t number = 0;
    return canonical && std::from_chars(digits.data(), digits.data() + digits.size(), number).ec == std::errc{} &&
           number < MAX_DEVICE_ORDINAL;
}

// How many /dev/nvidiaN entries `dev_dir` holds. An unreadable directory holds none.
std::size_t count_gpu_nodes(const std::filesystem::path& dev_dir) {
    std::error_code error;
    std::filesystem::directory_iterator it(dev_dir, error);
    std::size_t count = 0;
    for (; !error && it != std::filesystem::directory_iterator(); it.increment(error)) {
        if (is_gpu_node(it->path().filename().native())) {
            ++count;
        }
    }
    return count;
}

} // namespace

Config default_config(const std::filesystem::path& dev_dir) {
    Config config;
    config.node.name = "local";
    config.node.level = 3;
    config.node.subs = DEFAULT_SUBS;
    // CUDA numbers the devices it can see 0..count-1 whatever their /dev minor numbers are (a container
    // given /dev/nvidia2 and /dev/nvidia5 sees CUDA devices 0 and 1), so only the count is taken.
    const std::size_t gpus = std::min<std::size_t>(count_gpu_nodes(dev_dir), MAX_DEVICE_ORDINAL);
    for (std::uint32_t device = 0; device < gpus; ++device) {
        config.node.chips.push_back({device, ChipBackend::CUDA});
    }
    if (config.node.chips.empty()) {
        config.node.chips.push_back({0, ChipBackend::SIM});
    }
    return config;
}

} // namespace canopy::config
