#pragma once
// The version of canopy and of its wire ABI, as both binaries print them for --version.
//
// Thread safety: pure functions.

#include <string>
#include <string_view>

namespace canopy {

// The release, from the CMake project version ("0.1.0").
std::string_view canopy_version() noexcept;

// "PROGRAM VERSION (wire ABI: task args vN, mailbox layout vM)": the line `PROGRAM --version` prints.
std::string version_line(std::string_view program);

} // namespace canopy
