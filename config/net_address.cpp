// Addresses of TCP endpoints: their "HOST:PORT" text and whether a host names this machine's loopback.

#include "config/config.h"

#include <arpa/inet.h>
#include <netinet/in.h>

namespace canopy::config {
namespace {

// An IPv6 host (it holds a ':') is written in brackets so that the port's colon stays unambiguous.
std::string host_port(const std::string& host, std::uint16_t port) {
    const bool ipv6 = host.find(':') != std::string::npos;
    return (ipv6 ? "[" + host + "]" : host) + ":" + std::to_string(port);
}

} // namespace

std::string to_string(const ListenAddress& address) {
    return host_port(address.host, address.port);
}

std::string to_string(const NetAddress& address) {
    return host_port(address.host, address.port);
}

// Exact spellings only: "LOCALHOST" or "::ffff:127.0.0.1" are not taken for loopback, so that a check built on
// this answer errs towards refusing.
bool is_loopback_host(std::string_view host) noexcept {
    if (host == "localhost") {
        return true;
    }
    char text[INET6_ADDRSTRLEN] = {};
    if (host.size() >= sizeof text || host.find('\0') != std::string_view::npos) {
        return false;
    }
    host.copy(text, host.size());
    in_addr ipv4{};
    if (inet_pton(AF_INET, text, &ipv4) == 1) {
        return (ntohl(ipv4.s_addr) >> 24) == 127;
    }
    in6_addr ipv6{};
    return inet_pton(AF_INET6, text, &ipv6) == 1 && IN6_IS_ADDR_LOOPBACK(&ipv6);
}

} // namespace canopy::config
