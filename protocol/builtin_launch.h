#pragma once
// Launch options of built-in kernels on the wire.
//
// A built-in kernel sizes its own launch, so it ignores LaunchConfig's grid, block and shared_bytes. Its last
// word (offset 28), which a module kernel reads as scalar_slots, holds the built-in's launch flags instead: the
// word's meaning follows from the kernel name (is_module_kernel), which every reader knows. A frame for a
// built-in with no option set carries 0 there, exactly as before any flag existed.
//
// The flags are checked where a built-in call is checked (kernels::check_builtin: at submit, and again in
// the worker before anything runs), so an unknown bit or a flag on a kernel it does not apply to is refused
// with BAD_REQUEST on every path.
//
// Thread safety: constants and pure functions.

#include "protocol/mailbox.h"

#include <cstdint>

namespace canopy {

// float32 matmul may use TF32 tensor cores (operands rounded to 10 fraction bits, products accumulated in
// float). Without it a float32 matmul runs in plain IEEE float32 arithmetic. JSON: "launch": {"tf32": true}.
inline constexpr std::uint32_t BUILTIN_LAUNCH_TF32 = 1u << 0;
// Every flag defined; any other bit set is refused.
inline constexpr std::uint32_t BUILTIN_LAUNCH_FLAGS = BUILTIN_LAUNCH_TF32;

// The launch flags of a frame or request for a built-in kernel.
constexpr std::uint32_t builtin_launch_flags(const LaunchConfig& launch) noexcept {
    return launch.scalar_slots;
}

constexpr void set_builtin_launch_flags(LaunchConfig& launch, std::uint32_t flags) noexcept {
    launch.scalar_slots = flags;
}

} // namespace canopy
