#include "config/detail/values.h"

#include <algorithm>
#include <charconv>
#include <unordered_map>

namespace canopy::config::detail {
namespace {

bool is_name_char(char c) noexcept {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '.' ||
           c == '-';
}

bool is_digits(std::string_view text) noexcept {
    return !text.empty() && std::all_of(text.begin(), text.end(), [](char c) { return c >= '0' && c <= '9'; });
}

// The host part of "HOST:PORT" without brackets, checked to be a loopback host.
std::string read_loopback_host(const Field& field, std::string_view host) {
    if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
        std::string inner(host.substr(1, host.size() - 2));
        if (inner.find(':') == std::string::npos || !is_loopback_host(inner)) {
            field.fail("expected a loopback host (127.x.x.x, [::1] or localhost), got \"" + std::string(host) + "\"");
        }
        return inner;
    }
    std::string plain(host);
    if (plain.find(':') != std::string::npos || !is_loopback_host(plain)) {
        field.fail("expected a loopback host (127.x.x.x, [::1] or localhost), got \"" + plain + "\"");
    }
    return plain;
}

std::uint16_t read_port(const Field& field, std::string_view port) {
    unsigned value = 0;
    const auto [end, error] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (!is_digits(port) || error != std::errc{} || end != port.data() + port.size() || value < 1 || value > 65535) {
        field.fail("expected a port from 1 to 65535, got \"" + std::string(port) + "\"");
    }
    return static_cast<std::uint16_t>(value);
}

} // namespace

std::string read_name(const Field& field) {
    std::string name = field.string();
    if (name.empty() || name.size() > MAX_NAME_LENGTH) {
        field.fail("expected a name of 1 to " + std::to_string(MAX_NAME_LENGTH) + " characters, got " +
                   std::to_string(name.size()) + " characters");
    }
    if (!std::all_of(name.begin(), name.end(), is_name_char)) {
        field.fail("expected a name of letters, digits, '_', '.' and '-', got " + quote_value(field.value()));
    }
    if (name.find_first_not_of('.') == std::string::npos) {
        field.fail("expected a name that is not made of dots alone, got " + quote_value(field.value()));
    }
    return name;
}

std::filesystem::path read_absolute_path(const Field& field, std::size_t max_bytes) {
    const std::string text = field.string();
    if (text.empty() || text.front() != '/') {
        field.fail("expected an absolute path, got " + quote_value(field.value()));
    }
    if (text.find('\0') != std::string::npos) {
        field.fail("expected a path without NUL characters, got " + quote_value(field.value()));
    }
    if (text.size() > max_bytes) {
        field.fail("expected a path of at most " + std::to_string(max_bytes) + " bytes, got " +
                   std::to_string(text.size()) + " bytes");
    }
    return text;
}

std::vector<std::uint32_t> read_id_list(const Field& field) {
    std::vector<std::uint32_t> ids;
    std::unordered_map<std::uint32_t, std::string> seen;
    for (const Field& element : field.elements()) {
        const auto id = static_cast<std::uint32_t>(element.integer(0, UINT32_MAX));
        const auto [it, inserted] = seen.emplace(id, element.pointer());
        if (!inserted) {
            element.fail("duplicate id " + std::to_string(id) + " (also at " + it->second + ")");
        }
        ids.push_back(id);
    }
    return ids;
}

std::chrono::milliseconds read_duration(const Field& field, std::int64_t min_ms) {
    return std::chrono::milliseconds(field.integer(min_ms, MAX_DURATION_MS));
}

ListenAddress read_listen_address(const Field& field) {
    const std::string text = field.string();
    const std::size_t colon = text.rfind(':');
    if (colon == std::string::npos || colon == 0) {
        field.fail("expected \"HOST:PORT\", got " + quote_value(field.value()));
    }
    const std::string_view view(text);
    ListenAddress address;
    address.host = read_loopback_host(field, view.substr(0, colon));
    address.port = read_port(field, view.substr(colon + 1));
    return address;
}

} // namespace canopy::config::detail

namespace canopy::config {

bool is_node_name(std::string_view name) noexcept {
    return !name.empty() && name.size() <= MAX_NAME_LENGTH &&
           std::all_of(name.begin(), name.end(), detail::is_name_char) &&
           name.find_first_not_of('.') != std::string_view::npos && !is_worker_name(name);
}

bool is_worker_name(std::string_view name) noexcept {
    return (name.starts_with("chip") && detail::is_digits(name.substr(4))) ||
           (name.starts_with("sub") && detail::is_digits(name.substr(3)));
}

} // namespace canopy::config
