#pragma once
// Module kernels on the wire: a task whose kernel name is NAME:function runs `function` of the user module
// loaded under NAME on a cuda chip (docs/modules.md), with the grid, block, dynamic shared memory and parameter
// order of its frame's LaunchConfig (protocol/mailbox.h).
//
// validate_module_launch is the one gate for a module kernel's launch: the control protocol's JSON decoder,
// the supervisor at submit and the cuda chip before it launches all call it, so no boundary can drift from
// another. The limits are the CUDA limits of every GPU canopy serves (compute capability 9.0); a chip also
// checks the kernel's own limits (its threads per block, the device's shared memory) once it has the function.
//
// Thread safety: pure functions.

#include "protocol/mailbox.h"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace canopy {

// Most parameters a module kernel takes (one bit each in LaunchConfig::scalar_slots).
inline constexpr std::uint32_t MAX_MODULE_PARAMS = 32;
// Module names: [A-Za-z_][A-Za-z0-9_]*, at most this many bytes.
inline constexpr std::size_t MAX_MODULE_NAME_BYTES = 40;

inline constexpr std::uint32_t MAX_GRID_X = 2147483647; // 2^31 - 1
inline constexpr std::uint32_t MAX_GRID_YZ = 65535;
inline constexpr std::uint32_t MAX_BLOCK_XY = 1024;
inline constexpr std::uint32_t MAX_BLOCK_Z = 64;
inline constexpr std::uint32_t MAX_BLOCK_THREADS = 1024;
inline constexpr std::uint32_t MAX_SHARED_BYTES = 227 * 1024; // dynamic shared memory per block (sm_90 opt-in)

// Control frames that carry modules to a chip or a nested supervisor: "@module_load:NAME" (the blob is one
// INPUT uint8 tensor over a POSIX_SHM buffer holding the image) and "@module_unload:NAME" (an empty TaskArgs).
inline constexpr std::string_view MODULE_LOAD_FRAME = "@module_load:";
inline constexpr std::string_view MODULE_UNLOAD_FRAME = "@module_unload:";

// True when `kernel` names a module kernel (it contains ':').
constexpr bool is_module_kernel(std::string_view kernel) noexcept {
    return kernel.find(':') != std::string_view::npos;
}

// The NAME and function parts of NAME:function (split at the first ':').
std::string_view module_of(std::string_view kernel) noexcept;
std::string_view function_of(std::string_view kernel) noexcept;

// [A-Za-z_][A-Za-z0-9_]{0,39}.
bool is_valid_module_name(std::string_view name) noexcept;
// A kernel symbol: 1 or more of [A-Za-z0-9_$.] (C names and mangled C++ names).
bool is_valid_function_name(std::string_view name) noexcept;

// Checks NAME:function: both parts valid and the whole shorter than KERNEL_NAME_BYTES. Throws
// WireError(BAD_REQUEST) whose field is "kernel".
void validate_module_kernel_name(std::string_view kernel);

// Checks the launch of a module kernel whose blob carries `tensors` tensors and `scalars` scalars: every grid
// and block dimension at least 1 and within the CUDA limits, at most MAX_BLOCK_THREADS threads per block,
// shared_bytes at most MAX_SHARED_BYTES, at most MAX_MODULE_PARAMS parameters, and scalar_slots consistent with
// the counts (as many set bits as scalars, none at or past tensors + scalars). Throws WireError(BAD_REQUEST)
// naming the field: "launch.block: 2048 threads per block (2048 x 1 x 1), at most 1024".
void validate_module_launch(const LaunchConfig& launch, std::size_t tensors, std::size_t scalars);

} // namespace canopy
