#pragma once
// Readers for the value kinds the schema shares between sections: names, absolute paths, id lists,
// durations, loopback listen addresses, and the address, TLS and loss timeout of a link between hosts. Each
// throws ConfigError at the field's pointer.
//
// Thread safety: pure functions.

#include "config/config.h"
#include "config/detail/field.h"

#include <chrono>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace canopy::config::detail {

// 1..MAX_NAME_LENGTH bytes of [A-Za-z0-9_.-], not made of dots alone ("." and ".." are path words).
std::string read_name(const Field& field);

// A string starting with "/", without NUL bytes, of at most `max_bytes` bytes.
std::filesystem::path read_absolute_path(const Field& field, std::size_t max_bytes = SIZE_MAX);

// An array of distinct integers in [0, 2^32).
std::vector<std::uint32_t> read_id_list(const Field& field);

// An integer number of milliseconds in [min_ms, MAX_DURATION_MS].
std::chrono::milliseconds read_duration(const Field& field, std::int64_t min_ms);

// "HOST:PORT": HOST is "localhost", an IPv4 address in 127.0.0.0/8 or a bracketed IPv6 loopback address
// ("[::1]"); PORT is decimal 1..65535.
ListenAddress read_listen_address(const Field& field);

// "HOST:PORT" of a link between hosts: HOST is a DNS name (dot-separated labels of 1..63 bytes of
// [A-Za-z0-9-], not starting or ending with '-', 253 bytes in all), a dotted IPv4 address (four numbers
// 0..255) or an IPv6 address in brackets; PORT is decimal 1..65535. The host is kept without brackets.
// Whether "tls": "insecure" may be used with it is checked once the whole document is read
// (check_insecure_links).
NetAddress read_net_address(const Field& field);

// "insecure", or an object with exactly the keys ca, cert, key (absolute paths) and peer_name (1..253 bytes
// of [A-Za-z0-9.-]), all required.
TlsConfig read_tls(const Field& field);

// An integer number of milliseconds in [MIN_LOST_AFTER_MS, MAX_LOST_AFTER_MS].
std::chrono::milliseconds read_lost_after(const Field& field);

} // namespace canopy::config::detail
