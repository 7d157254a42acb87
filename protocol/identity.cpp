#include "protocol/identity.h"

#include "protocol/error.h"

#include <cerrno>
#include <charconv>
#include <cstring>
#include <sys/random.h>
#include <system_error>

namespace canopy {
namespace {

constexpr char HEX[] = "0123456789abcdef";

// The input as it may appear in a message: at most `limit` bytes, non-printable bytes as \xNN.
std::string quoted(std::string_view text, std::size_t limit = 80) {
    std::string out;
    for (char c : text.substr(0, limit)) {
        const auto u = static_cast<unsigned char>(c);
        if (u >= 0x20 && u < 0x7f) {
            out.push_back(c);
        } else {
            out += "\\x";
            out.push_back(HEX[u >> 4]);
            out.push_back(HEX[u & 0xf]);
        }
    }
    return out;
}

[[noreturn]] void malformed(const std::string& problem) {
    throw WireError(ErrorCode::INVALID_DESCRIPTOR, "identity", problem);
}

int hex_value(char c) noexcept {
    if (c >= '0' && c <= '9') {
        return c - '0';
    }
    if (c >= 'a' && c <= 'f') {
        return c - 'a' + 10;
    }
    return -1;
}

// A canonical unsigned decimal: digits only, no leading zero unless the number is 0, fits in T.
template <class T>
bool parse_decimal(std::string_view text, T& out) noexcept {
    if (text.empty() || (text.size() > 1 && text[0] == '0')) {
        return false;
    }
    for (char c : text) {
        if (c < '0' || c > '9') {
            return false;
        }
    }
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc{} && end == text.data() + text.size();
}

} // namespace

void validate_identity(const CanonicalIdentity& id) {
    validate_identity_as(id, ErrorCode::INVALID_DESCRIPTOR, {});
}

void validate_identity_as(const CanonicalIdentity& id, ErrorCode code, std::string_view prefix) {
    auto fail = [&](const char* field, const char* problem) {
        throw WireError(code, std::string(prefix) + "identity." + field, problem);
    };
    std::uint64_t halves[2];
    std::memcpy(halves, id.owner_instance.data(), sizeof halves);
    if ((halves[0] | halves[1]) == 0) {
        fail("owner_instance", "owner instance must not be all zero");
    }
    if (id.generation == 0) {
        fail("generation", "generation must be >= 1");
    }
    if (id.reserved != 0) {
        fail("reserved", "reserved bytes must be zero");
    }
}

bool same_slot(const CanonicalIdentity& a, const CanonicalIdentity& b) noexcept {
    return a.owner_instance == b.owner_instance && a.buffer_id == b.buffer_id;
}

std::string to_string(const CanonicalIdentity& id) {
    std::string out;
    out.reserve(32 + 1 + 20 + 1 + 10);
    for (auto byte : id.owner_instance) {
        out.push_back(HEX[byte >> 4]);
        out.push_back(HEX[byte & 0xf]);
    }
    out.push_back('.');
    out += std::to_string(id.buffer_id);
    out.push_back('.');
    out += std::to_string(id.generation);
    return out;
}

CanonicalIdentity parse_identity(std::string_view text) {
    const auto first_dot = text.find('.');
    if (first_dot == std::string_view::npos) {
        malformed("expected OWNER.BUFFER_ID.GENERATION, got '" + quoted(text) + "'");
    }
    const auto second_dot = text.find('.', first_dot + 1);
    if (second_dot == std::string_view::npos) {
        malformed("expected OWNER.BUFFER_ID.GENERATION, got '" + quoted(text) + "'");
    }
    const auto owner = text.substr(0, first_dot);
    const auto buffer_id = text.substr(first_dot + 1, second_dot - first_dot - 1);
    const auto generation = text.substr(second_dot + 1);

    CanonicalIdentity id{};
    if (owner.size() != 32) {
        malformed("owner instance must be 32 lower-case hex digits, got " + std::to_string(owner.size()) +
                  " characters");
    }
    for (std::size_t i = 0; i < 16; ++i) {
        const int hi = hex_value(owner[2 * i]);
        const int lo = hex_value(owner[2 * i + 1]);
        if (hi < 0 || lo < 0) {
            malformed("owner instance must be 32 lower-case hex digits");
        }
        id.owner_instance[i] = static_cast<std::uint8_t>((hi << 4) | lo);
    }
    if (!parse_decimal(buffer_id, id.buffer_id)) {
        malformed("buffer id must be a decimal number below 2^64 without leading zeros, got '" + quoted(buffer_id, 40) +
                  "'");
    }
    if (!parse_decimal(generation, id.generation)) {
        malformed("generation must be a decimal number below 2^32 without leading zeros, got '" +
                  quoted(generation, 40) + "'");
    }
    validate_identity(id);
    return id;
}

std::array<std::uint8_t, 16> draw_owner_instance() {
    std::array<std::uint8_t, 16> nonce{};
    do {
        std::size_t filled = 0;
        while (filled < nonce.size()) {
            const ssize_t n = ::getrandom(nonce.data() + filled, nonce.size() - filled, 0);
            if (n < 0) {
                if (errno == EINTR) {
                    continue;
                }
                throw std::system_error(errno, std::generic_category(), "getrandom");
            }
            filled += static_cast<std::size_t>(n);
        }
    } while (nonce == std::array<std::uint8_t, 16>{});
    return nonce;
}

std::size_t IdentityHash::operator()(const CanonicalIdentity& id) const noexcept {
    // FNV-1a over the fixed 32 bytes.
    unsigned char bytes[sizeof(CanonicalIdentity)];
    std::memcpy(bytes, &id, sizeof bytes);
    std::uint64_t h = 1469598103934665603ULL;
    for (unsigned char b : bytes) {
        h = (h ^ b) * 1099511628211ULL;
    }
    return static_cast<std::size_t>(h);
}

} // namespace canopy
