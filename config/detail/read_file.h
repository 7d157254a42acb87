#pragma once
// Reads a whole config file into memory.
//
// Thread safety: safe from any thread; the file descriptor is opened O_CLOEXEC and closed before return.

#include <cstddef>
#include <filesystem>
#include <string>

namespace canopy::config::detail {

// A config file is at most this large; anything bigger is refused before it is read.
inline constexpr std::size_t MAX_CONFIG_FILE_BYTES = std::size_t{16} << 20;

// The file's bytes. Throws ConfigError with pointer "" naming the path and strerror when the file cannot
// be opened or read, is not a regular file, or is larger than MAX_CONFIG_FILE_BYTES.
std::string read_config_file(const std::filesystem::path& file);

} // namespace canopy::config::detail
