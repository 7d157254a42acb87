#pragma once
// What a user module image is (docs/modules.md): PTX text, a cubin (an ELF file) or a fatbin, at most
// MAX_MODULE_IMAGE_BYTES. The supervisor classifies an image before it accepts it; a cuda chip classifies it
// again to know whether the driver needs a terminating NUL (PTX).
//
// Thread safety: pure functions.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>

namespace canopy {

inline constexpr std::size_t MAX_MODULE_IMAGE_BYTES = std::size_t{64} << 20;

enum class ModuleFormat { PTX, CUBIN, FATBIN };

// "ptx", "cubin", "fatbin".
const char* to_string(ModuleFormat format) noexcept;

// CUBIN: starts with the ELF magic "\x7fELF". FATBIN: starts with the fatbin magic 0xBA55ED50 (little-endian).
// PTX: text without NUL bytes (trailing NULs aside) whose first token after whitespace and comments is a
// directive ('.'), containing a ".version" and a ".target" directive. nullopt for anything else.
std::optional<ModuleFormat> detect_module_format(std::span<const std::byte> image) noexcept;

} // namespace canopy
