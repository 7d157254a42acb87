#pragma once
// Byte counts and durations as people write and read them.
//
// parse_byte_size accepts a plain decimal integer or one followed by a binary suffix: K, M, G, T
// (case-insensitive, optionally followed by "iB" or "B"), meaning KiB, MiB, GiB, TiB: "4096", "64K",
// "1M", "2GiB". Nothing else is accepted: no sign, no fraction, no spaces, no overflow.
//
// Thread safety: pure functions.

#include <cstdint>
#include <string>
#include <string_view>

namespace canopy::cli {

// Throws usage_error naming `option` and the text ("--bytes \"4Q\": ...") when `text` is not a byte size.
std::uint64_t parse_byte_size(std::string_view text, std::string_view option);

// A duration: a decimal integer with a unit, ms, s, m or h ("500ms", "30s", "5m", "2h"); a plain integer is
// seconds. Returns milliseconds. Throws usage_error naming `option` and the text for anything else, and for a
// duration over a day.
std::uint64_t parse_duration_ms(std::string_view text, std::string_view option);

// "512 B", "1.0 KiB", "4.0 MiB", "1.5 GiB": one decimal place above 1 KiB, binary units.
std::string format_bytes(std::uint64_t n);

// A worker's or the daemon's uptime, whole seconds: "12s", "3m04s", "2h05m", "3d04h". Negative or
// non-finite input renders as "-".
std::string format_uptime(double seconds);

// A task's run time from nanoseconds: "850ns", "12us", "3.4ms", "1.20s", then as format_uptime.
std::string format_elapsed_ns(std::uint64_t ns);

} // namespace canopy::cli
