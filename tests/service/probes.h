#pragma once
// What end-to-end tests observe of a daemon from outside: its CPU time, resident memory and open file
// descriptors (from /proc), and its loopback TCP listener (a free port, connects, one HTTP GET).
// Plain functions; safe from any thread. Failures throw std::runtime_error naming the call.

#include <cstdint>
#include <string>
#include <sys/types.h>

namespace canopy::e2e {

// User plus system CPU time of every thread of `pid` so far, in seconds.
double cpu_seconds(pid_t pid);
// VmRSS of `pid`, in bytes.
std::uint64_t rss_bytes(pid_t pid);
// File descriptors `pid` has open.
std::size_t open_fds(pid_t pid);

// A loopback port that was free a moment ago.
int free_port();
// A connected TCP socket to 127.0.0.1:port (the caller closes it).
int tcp_connect(int port);
// One HTTP/1.0 GET on 127.0.0.1:port; the whole response, or what arrived within 10 s of silence.
std::string http_get(int port, const std::string& path);

} // namespace canopy::e2e
