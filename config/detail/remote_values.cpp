// The values of a link between hosts: its address, its TLS settings and how long a silent peer is waited for.

#include "config/detail/values.h"

#include <algorithm>
#include <arpa/inet.h>
#include <netinet/in.h>

namespace canopy::config::detail {
namespace {

constexpr std::size_t MAX_HOST_NAME_BYTES = 253;
constexpr std::size_t MAX_LABEL_BYTES = 63;
constexpr std::size_t MAX_PEER_NAME_BYTES = 253;

const std::string HOST_PORT_FORMS =
    "HOST:PORT (HOST a DNS name, a dotted IPv4 address or an IPv6 address in brackets; PORT 1..65535)";

bool is_digit(char c) noexcept {
    return c >= '0' && c <= '9';
}

bool is_label_char(char c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || is_digit(c) || c == '-';
}

bool is_label(std::string_view label) noexcept {
    return !label.empty() && label.size() <= MAX_LABEL_BYTES && label.front() != '-' && label.back() != '-' &&
           std::all_of(label.begin(), label.end(), is_label_char);
}

bool is_host_name(std::string_view host) noexcept {
    if (host.size() > MAX_HOST_NAME_BYTES) {
        return false;
    }
    for (std::size_t start = 0;;) {
        const std::size_t dot = host.find('.', start);
        if (!is_label(host.substr(start, dot == std::string_view::npos ? dot : dot - start))) {
            return false;
        }
        if (dot == std::string_view::npos) {
            return true;
        }
        start = dot + 1;
    }
}

bool parses_as(int family, const std::string& host) {
    in6_addr address{}; // large enough for either family
    return inet_pton(family, host.c_str(), &address) == 1;
}

std::string quote_text(std::string_view text) {
    return quote_value(nlohmann::json(std::string(text)));
}

// A host without brackets: text of digits and dots alone is an IPv4 address, anything else a DNS name.
std::string read_plain_host(const Field& field, std::string_view host) {
    std::string text(host);
    if (std::all_of(text.begin(), text.end(), [](char c) { return is_digit(c) || c == '.'; })) {
        if (!parses_as(AF_INET, text)) {
            field.fail("expected a dotted IPv4 address (four numbers 0..255), got " + quote_text(text));
        }
        return text;
    }
    if (text.find(':') != std::string::npos) {
        field.fail("expected an IPv6 host in brackets (\"[fd00::2]:7471\"), got " + quote_value(field.value()));
    }
    if (text.size() > MAX_HOST_NAME_BYTES) {
        field.fail("expected a host name of at most " + std::to_string(MAX_HOST_NAME_BYTES) + " bytes, got " +
                   std::to_string(text.size()) + " bytes");
    }
    if (!is_host_name(text)) {
        field.fail("expected a host name of dot-separated labels of 1 to 63 letters, digits and '-' (not at "
                   "either end of a label), got " +
                   quote_text(text));
    }
    return text;
}

std::string read_host(const Field& field, std::string_view host) {
    if (!host.starts_with('[')) {
        return read_plain_host(field, host);
    }
    std::string inner(host.substr(1, host.size() - 2));
    // inet_pton reads up to a NUL: "[::1\0x]" would pass as ::1 and reach gRPC cut short.
    if (!host.ends_with(']') || inner.find('\0') != std::string::npos || !parses_as(AF_INET6, inner)) {
        field.fail("expected an IPv6 address between the brackets, got " + quote_text(host));
    }
    return inner;
}

std::uint16_t read_net_port(const Field& field, std::string_view port) {
    const bool digits = !port.empty() && std::all_of(port.begin(), port.end(), is_digit);
    const std::size_t significant = digits ? port.find_first_not_of('0') : 0;
    const bool in_range = digits && significant != std::string_view::npos && port.size() - significant <= 5 &&
                          std::stoul(std::string(port.substr(significant))) <= 65535;
    if (!in_range) {
        field.fail("port must be 1..65535, got " + (digits ? std::string(port) : quote_text(port)));
    }
    return static_cast<std::uint16_t>(std::stoul(std::string(port)));
}

std::string read_peer_name(const Field& field) {
    const std::string name = field.string();
    if (name.empty() || name.size() > MAX_PEER_NAME_BYTES) {
        field.fail("expected a peer name of 1 to " + std::to_string(MAX_PEER_NAME_BYTES) + " bytes, got " +
                   std::to_string(name.size()) + " bytes");
    }
    const auto allowed = [](char c) { return is_label_char(c) || c == '.'; };
    if (!std::all_of(name.begin(), name.end(), allowed)) {
        field.fail("expected a peer name of letters, digits, '.' and '-', got " + quote_value(field.value()));
    }
    return name;
}

} // namespace

NetAddress read_net_address(const Field& field) {
    const std::string text = field.string();
    // The port follows the last colon; an IPv6 host's own colons sit inside its brackets.
    const std::size_t colon = text.rfind(':');
    const bool bracketed = text.starts_with('[');
    const std::size_t close = text.find(']');
    if (colon == std::string::npos || colon == 0 || colon + 1 == text.size() ||
        (bracketed && (close == std::string::npos || close + 1 != colon))) {
        field.fail("expected " + HOST_PORT_FORMS + ", got " + quote_value(field.value()));
    }
    const std::string_view view(text);
    NetAddress address;
    address.host = read_host(field, view.substr(0, colon));
    address.port = read_net_port(field, view.substr(colon + 1));
    return address;
}

TlsConfig read_tls(const Field& field) {
    const std::string expected = R"(expected "insecure" or an object with ca, cert, key and peer_name, got )";
    if (field.value().is_string()) {
        if (field.value() != "insecure") {
            field.fail(expected + quote_value(field.value()));
        }
        TlsConfig insecure;
        insecure.insecure = true;
        return insecure;
    }
    if (!field.value().is_object()) {
        field.fail(expected + describe_value(field.value()));
    }
    const ObjectReader object(field, {"ca", "cert", "key", "peer_name"});
    TlsConfig tls;
    tls.ca = read_absolute_path(object.require("ca"));
    tls.cert = read_absolute_path(object.require("cert"));
    tls.key = read_absolute_path(object.require("key"));
    tls.peer_name = read_peer_name(object.require("peer_name"));
    return tls;
}

std::chrono::milliseconds read_lost_after(const Field& field) {
    return std::chrono::milliseconds(field.integer(MIN_LOST_AFTER_MS, MAX_LOST_AFTER_MS));
}

} // namespace canopy::config::detail
