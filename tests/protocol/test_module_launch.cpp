// Module kernels on the wire: LaunchConfig's layout, kernel names, the launch gate (validate_module_launch) and
// the classification of module images.
#include "protocol/error.h"
#include "protocol/mailbox.h"
#include "protocol/module_image.h"
#include "protocol/module_launch.h"

#include <catch2/catch.hpp>
#include <cstddef>
#include <string>
#include <vector>

using namespace canopy;

namespace {

LaunchConfig shape(std::uint32_t gx, std::uint32_t bx, std::uint32_t slots = 0) {
    return LaunchConfig{{gx, 1, 1}, {bx, 1, 1}, 0, slots};
}

// The WireError of validate_module_launch, as "FIELD: PROBLEM"; empty when it passes.
std::string refusal(const LaunchConfig& l, std::size_t tensors, std::size_t scalars) {
    try {
        validate_module_launch(l, tensors, scalars);
    } catch (const WireError& e) {
        CHECK(e.code() == ErrorCode::BAD_REQUEST);
        return e.what();
    }
    return {};
}

std::vector<std::byte> bytes(const std::string& s) {
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    return {p, p + s.size()};
}

} // namespace

TEST_CASE("LaunchConfig keeps its 32-byte layout with scalar_slots in the last word", "[protocol][module]") {
    STATIC_REQUIRE(sizeof(LaunchConfig) == 32);
    STATIC_REQUIRE(offsetof(LaunchConfig, grid) == 0);
    STATIC_REQUIRE(offsetof(LaunchConfig, block) == 12);
    STATIC_REQUIRE(offsetof(LaunchConfig, shared_bytes) == 24);
    STATIC_REQUIRE(offsetof(LaunchConfig, scalar_slots) == 28);
    STATIC_REQUIRE(MAX_MODULE_PARAMS == 32);
}

TEST_CASE("module kernel names split at the first colon and are checked part by part", "[protocol][module]") {
    CHECK(is_module_kernel("m:saxpy"));
    CHECK_FALSE(is_module_kernel("axpy"));
    CHECK(module_of("m:saxpy") == "m");
    CHECK(function_of("m:saxpy") == "saxpy");
    CHECK(function_of("m:a:b") == "a:b");
    CHECK(is_valid_module_name("_m0"));
    CHECK(is_valid_module_name(std::string(40, 'a')));
    CHECK_FALSE(is_valid_module_name(std::string(41, 'a')));
    CHECK_FALSE(is_valid_module_name("0m"));
    CHECK_FALSE(is_valid_module_name("my-mod"));
    CHECK_FALSE(is_valid_module_name(""));
    CHECK(is_valid_function_name("_Z5saxpyPfPKffx"));
    CHECK_FALSE(is_valid_function_name(""));
    CHECK_FALSE(is_valid_function_name("a:b"));
    CHECK_NOTHROW(validate_module_kernel_name("m:saxpy"));
    CHECK_THROWS_WITH(validate_module_kernel_name("my-mod:f"),
                      "kernel: 'my-mod:f': module name 'my-mod' must match [A-Za-z_][A-Za-z0-9_]{0,39}");
    CHECK_THROWS_WITH(validate_module_kernel_name("m:"), "kernel: 'm:': function name '' must be 1 or more of "
                                                         "[A-Za-z0-9_$.]");
    const std::string long_name = "m:" + std::string(62, 'f');
    CHECK_THROWS_WITH(validate_module_kernel_name(long_name),
                      "kernel: '" + long_name + "' is 64 bytes; NAME:function has at most 63");
}

TEST_CASE("the launch gate accepts the CUDA limits and refuses each bound by name", "[protocol][module]") {
    CHECK(refusal(shape(1, 1), 0, 0).empty());
    CHECK(refusal(LaunchConfig{{MAX_GRID_X, 65535, 65535}, {1024, 1, 1}, MAX_SHARED_BYTES, 0}, 0, 0).empty());
    CHECK(refusal(LaunchConfig{{1, 1, 1}, {8, 8, 16}, 0, 0}, 0, 0).empty());
    CHECK(refusal(LaunchConfig{{0, 1, 1}, {1, 1, 1}, 0, 0}, 0, 0) == "launch.grid[0]: must be at least 1");
    CHECK(refusal(LaunchConfig{{1, 1, 0}, {1, 1, 1}, 0, 0}, 0, 0) == "launch.grid[2]: must be at least 1");
    CHECK(refusal(LaunchConfig{{1, 1, 1}, {1, 0, 1}, 0, 0}, 0, 0) == "launch.block[1]: must be at least 1");
    CHECK(refusal(LaunchConfig{{2147483648u, 1, 1}, {1, 1, 1}, 0, 0}, 0, 0) ==
          "launch.grid[0]: 2147483648 is above the limit of 2147483647");
    CHECK(refusal(LaunchConfig{{1, 65536, 1}, {1, 1, 1}, 0, 0}, 0, 0) ==
          "launch.grid[1]: 65536 is above the limit of 65535");
    CHECK(refusal(LaunchConfig{{1, 1, 1}, {2048, 1, 1}, 0, 0}, 0, 0) ==
          "launch.block[0]: 2048 is above the limit of 1024");
    CHECK(refusal(LaunchConfig{{1, 1, 1}, {1, 1, 65}, 0, 0}, 0, 0) == "launch.block[2]: 65 is above the limit of 64");
    CHECK(refusal(LaunchConfig{{1, 1, 1}, {64, 32, 1}, 0, 0}, 0, 0) ==
          "launch.block: 2048 threads per block (64 x 32 x 1), at most 1024");
    CHECK(refusal(LaunchConfig{{1, 1, 1}, {1, 1, 1}, MAX_SHARED_BYTES + 1, 0}, 0, 0) ==
          "launch.shared_bytes: 232449 bytes is above the limit of 232448 (227 KiB)");
}

TEST_CASE("scalar_slots must agree with the blob's tensor and scalar counts", "[protocol][module]") {
    // saxpy(float* y, const float* x, float a, long long n): tensors at 0 and 1, scalars at 2 and 3.
    CHECK(refusal(shape(1, 1, 0b1100), 2, 2).empty());
    // f(float a, float* x): a scalar before a tensor.
    CHECK(refusal(shape(1, 1, 0b01), 1, 1).empty());
    CHECK(refusal(shape(1, 1, 0b0100), 2, 2) ==
          "launch.scalar_slots: 1 parameters are marked scalar but the task has 2 scalars");
    CHECK(refusal(shape(1, 1, 0b1110), 2, 2) ==
          "launch.scalar_slots: 3 parameters are marked scalar but the task has 2 scalars");
    CHECK(refusal(shape(1, 1, 0b10000), 2, 2) ==
          "launch.scalar_slots: bit 4 is set but the task has only 4 parameters");
    CHECK(refusal(shape(1, 1, 0x80000000u), 31, 0) ==
          "launch.scalar_slots: bit 31 is set but the task has only 31 parameters");
    CHECK(refusal(shape(1, 1, 0xFFFF0000u), 16, 16).empty());
    CHECK(refusal(shape(1, 1), 33, 0) == "params: 33 parameters, at most 32");
}

TEST_CASE("module images are classified as PTX, cubin or fatbin by their bytes", "[protocol][module]") {
    CHECK(detect_module_format(bytes(".version 8.0\n.target sm_90\n.address_size 64\n")) == ModuleFormat::PTX);
    CHECK(detect_module_format(bytes(
              "// Generated by NVIDIA NVVM Compiler\n/* x */\n  .version 9.0\n.target sm_90\n")) == ModuleFormat::PTX);
    CHECK(detect_module_format(bytes(std::string(".version 8.0\n.target sm_90\n") + '\0' + '\0')) == ModuleFormat::PTX);
    CHECK(detect_module_format(bytes(std::string("\x7f"
                                                 "ELF\x02\x01",
                                                 6))) == ModuleFormat::CUBIN);
    CHECK(detect_module_format(bytes(std::string("\x50\xed\x55\xba\x01\x00", 6))) == ModuleFormat::FATBIN);
    CHECK_FALSE(detect_module_format(bytes("plain bytes")));
    CHECK_FALSE(detect_module_format(bytes(".version 8.0\n")));                               // no .target
    CHECK_FALSE(detect_module_format(bytes("int x; .version 8.0 .target sm_90")));            // not a directive first
    CHECK_FALSE(detect_module_format(bytes(std::string(".version 8.0\0.target sm_90", 27)))); // NUL inside
    CHECK_FALSE(detect_module_format({}));
    CHECK(std::string(to_string(ModuleFormat::FATBIN)) == "fatbin");
}
