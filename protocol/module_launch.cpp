#include "protocol/module_launch.h"

#include "protocol/error.h"

#include <bit>
#include <string>

namespace canopy {
namespace {

[[noreturn]] void refuse(const std::string& field, const std::string& problem) {
    throw WireError(ErrorCode::BAD_REQUEST, field, problem);
}

constexpr bool is_alpha(char c) noexcept {
    return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_';
}

constexpr bool is_digit(char c) noexcept {
    return c >= '0' && c <= '9';
}

std::string shape(const std::uint32_t (&d)[3]) {
    return std::to_string(d[0]) + " x " + std::to_string(d[1]) + " x " + std::to_string(d[2]);
}

void check_dims(const std::uint32_t (&d)[3], const char* field, const std::uint32_t (&limits)[3]) {
    for (int i = 0; i < 3; ++i) {
        const std::string at = std::string(field) + "[" + std::to_string(i) + "]";
        if (d[i] == 0) {
            refuse(at, "must be at least 1");
        }
        if (d[i] > limits[i]) {
            refuse(at, std::to_string(d[i]) + " is above the limit of " + std::to_string(limits[i]));
        }
    }
}

} // namespace

std::string_view module_of(std::string_view kernel) noexcept {
    return kernel.substr(0, kernel.find(':'));
}

std::string_view function_of(std::string_view kernel) noexcept {
    const auto colon = kernel.find(':');
    return colon == std::string_view::npos ? std::string_view{} : kernel.substr(colon + 1);
}

bool is_valid_module_name(std::string_view name) noexcept {
    if (name.empty() || name.size() > MAX_MODULE_NAME_BYTES || !is_alpha(name.front())) {
        return false;
    }
    for (char c : name) {
        if (!is_alpha(c) && !is_digit(c)) {
            return false;
        }
    }
    return true;
}

bool is_valid_function_name(std::string_view name) noexcept {
    if (name.empty()) {
        return false;
    }
    for (char c : name) {
        if (!is_alpha(c) && !is_digit(c) && c != '$' && c != '.') {
            return false;
        }
    }
    return true;
}

void validate_module_kernel_name(std::string_view kernel) {
    const std::string text(kernel);
    if (kernel.size() >= KERNEL_NAME_BYTES) {
        refuse("kernel", "'" + text + "' is " + std::to_string(kernel.size()) + " bytes; NAME:function has at most " +
                             std::to_string(KERNEL_NAME_BYTES - 1));
    }
    if (!is_valid_module_name(module_of(kernel))) {
        refuse("kernel", "'" + text + "': module name '" + std::string(module_of(kernel)) +
                             "' must match [A-Za-z_][A-Za-z0-9_]{0,39}");
    }
    if (!is_valid_function_name(function_of(kernel))) {
        refuse("kernel", "'" + text + "': function name '" + std::string(function_of(kernel)) +
                             "' must be 1 or more of [A-Za-z0-9_$.]");
    }
}

void validate_module_launch(const LaunchConfig& launch, std::size_t tensors, std::size_t scalars) {
    check_dims(launch.grid, "launch.grid", {MAX_GRID_X, MAX_GRID_YZ, MAX_GRID_YZ});
    check_dims(launch.block, "launch.block", {MAX_BLOCK_XY, MAX_BLOCK_XY, MAX_BLOCK_Z});
    const std::uint64_t threads =
        std::uint64_t{launch.block[0]} * std::uint64_t{launch.block[1]} * std::uint64_t{launch.block[2]};
    if (threads > MAX_BLOCK_THREADS) {
        refuse("launch.block", std::to_string(threads) + " threads per block (" + shape(launch.block) + "), at most " +
                                   std::to_string(MAX_BLOCK_THREADS));
    }
    if (launch.shared_bytes > MAX_SHARED_BYTES) {
        refuse("launch.shared_bytes", std::to_string(launch.shared_bytes) + " bytes is above the limit of " +
                                          std::to_string(MAX_SHARED_BYTES) + " (227 KiB)");
    }
    const std::size_t params = tensors + scalars;
    if (params > MAX_MODULE_PARAMS) {
        refuse("params", std::to_string(params) + " parameters, at most " + std::to_string(MAX_MODULE_PARAMS));
    }
    const std::uint32_t used = params == MAX_MODULE_PARAMS ? ~0u : (1u << params) - 1u;
    if ((launch.scalar_slots & ~used) != 0) {
        refuse("launch.scalar_slots", "bit " + std::to_string(std::countr_zero(launch.scalar_slots & ~used)) +
                                          " is set but the task has only " + std::to_string(params) + " parameters");
    }
    const auto marked = static_cast<std::size_t>(std::popcount(launch.scalar_slots));
    if (marked != scalars) {
        refuse("launch.scalar_slots", std::to_string(marked) + " parameters are marked scalar but the task has " +
                                          std::to_string(scalars) + " scalars");
    }
}

} // namespace canopy
