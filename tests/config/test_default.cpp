// default_config: one cuda chip per /dev/nvidiaN entry, or one sim chip; two subs; defaults elsewhere.

#include "config/to_json.h"
#include "config_test_util.h"

#include <fstream>

using canopy::config::ChipBackend;
using canopy::config::ChipConfig;
using canopy::config::Config;
using canopy::config::default_config;
using canopy::config::testing::TempDir;

namespace {

// A fake /dev with the given entries as empty regular files.
void touch_all(const TempDir& dir, std::initializer_list<const char*> names) {
    for (const char* name : names) {
        std::ofstream(dir.path() / name).put('\0');
    }
}

std::vector<ChipConfig> cuda_chips(std::uint32_t count) {
    std::vector<ChipConfig> chips;
    for (std::uint32_t device = 0; device < count; ++device) {
        chips.push_back({device, ChipBackend::CUDA});
    }
    return chips;
}

// Everything but the chips is the same in every default config.
void check_common_defaults(const Config& config) {
    const Config defaults;
    CHECK(config.node.name == "local");
    CHECK(config.node.level == 3);
    CHECK(config.node.subs == 2);
    CHECK(config.node.nodes.empty());
    CHECK(config.control == defaults.control);
    CHECK(config.control.socket == "/run/canopy/canopy.sock");
    CHECK(config.state_dir == "/var/lib/canopy");
    CHECK(config.log == defaults.log);
    CHECK(config.preload.empty());
    CHECK(config.supervision == defaults.supervision);
    CHECK_FALSE(config.metrics.listen.has_value());
    CHECK_FALSE(config.testing.fault_kernels);
    // It is a valid config.
    CHECK(canopy::config::parse_config(canopy::config::to_json(config).dump()) == config);
}

} // namespace

TEST_CASE("default_config makes one sim chip when no /dev/nvidiaN exists", "[config]") {
    const TempDir dev;
    touch_all(dev, {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools", "nvidia-modeset", "null"});
    const Config config = default_config(dev.path());
    CHECK(config.node.chips == std::vector<ChipConfig>{{0, ChipBackend::SIM}});
    check_common_defaults(config);
}

TEST_CASE("default_config makes one cuda chip for one /dev/nvidiaN", "[config]") {
    const TempDir dev;
    touch_all(dev, {"nvidia0", "nvidiactl", "nvidia-uvm"});
    const Config config = default_config(dev.path());
    CHECK(config.node.chips == cuda_chips(1));
    check_common_defaults(config);
}

TEST_CASE("default_config makes one cuda chip per /dev/nvidiaN", "[config]") {
    const TempDir dev;
    touch_all(dev, {"nvidia2", "nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"});
    const Config config = default_config(dev.path());
    CHECK(config.node.chips == cuda_chips(3));
    check_common_defaults(config);
}

TEST_CASE("default_config numbers chips 0..count-1 as CUDA does when /dev numbers have gaps", "[config]") {
    const TempDir dev;
    touch_all(dev, {"nvidia5", "nvidia2"});
    CHECK(default_config(dev.path()).node.chips == cuda_chips(2));
}

TEST_CASE("default_config ignores names that are not nvidia<digits>", "[config]") {
    const TempDir dev;
    touch_all(dev, {"nvidia", "nvidia01", "nvidia1a", "nvidia-1", "nvidia99999", "xnvidia0", "nvidia-caps"});
    CHECK(default_config(dev.path()).node.chips == std::vector<ChipConfig>{{0, ChipBackend::SIM}});
}

TEST_CASE("default_config makes one sim chip when the dev directory does not exist", "[config]") {
    const TempDir dir;
    const Config config = default_config(dir.path() / "absent");
    CHECK(config.node.chips == std::vector<ChipConfig>{{0, ChipBackend::SIM}});
    check_common_defaults(config);
}
