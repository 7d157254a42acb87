#pragma once
// CanonicalIdentity: the one name of a buffer across every process and every level of the tree.
//
// 32 bytes, fixed length, no length field: hashing and comparing it never read out of bounds.
//   owner_instance  128-bit nonce drawn from getrandom once per supervisor incarnation
//   buffer_id       unique within that incarnation
//   generation      starts at 1; incremented whenever a buffer-id slot is reused
//   reserved        zero
// The string form is "<32 lower-case hex digits of owner_instance>.<buffer_id>.<generation>" in decimal,
// e.g. "00112233445566778899aabbccddeeff.42.1". It round-trips exactly; parse_identity refuses every
// other spelling (upper-case hex, leading zeros, signs, spaces, missing or extra parts).
//
// Thread safety: plain values and pure functions.

#include "protocol/error.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <type_traits>

namespace canopy {

struct CanonicalIdentity {
    std::array<std::uint8_t, 16> owner_instance;
    std::uint64_t buffer_id;
    std::uint32_t generation;
    std::uint32_t reserved;

    friend bool operator==(const CanonicalIdentity&, const CanonicalIdentity&) = default;
};

static_assert(sizeof(CanonicalIdentity) == 32);
static_assert(std::is_trivially_copyable_v<CanonicalIdentity>);
static_assert(std::is_standard_layout_v<CanonicalIdentity>);
static_assert(offsetof(CanonicalIdentity, owner_instance) == 0);
static_assert(offsetof(CanonicalIdentity, buffer_id) == 16);
static_assert(offsetof(CanonicalIdentity, generation) == 24);
static_assert(offsetof(CanonicalIdentity, reserved) == 28);

// Throws WireError(INVALID_DESCRIPTOR) naming "identity.<field>": owner_instance all zero, generation 0,
// reserved non-zero.
void validate_identity(const CanonicalIdentity& id);
// The same gate with the field prefixed by `prefix` and errors carrying `code`.
void validate_identity_as(const CanonicalIdentity& id, ErrorCode code, std::string_view prefix);

// Same owner_instance and buffer_id; the generation may differ. Used to tell a stale descriptor from an
// unknown one.
bool same_slot(const CanonicalIdentity& a, const CanonicalIdentity& b) noexcept;

std::string to_string(const CanonicalIdentity& id);

// Throws WireError(INVALID_DESCRIPTOR) with field "identity" naming what is malformed. The result passes
// validate_identity.
CanonicalIdentity parse_identity(std::string_view text);

// A fresh 128-bit nonce from getrandom(2); never all zero. Throws std::system_error if the kernel
// refuses.
std::array<std::uint8_t, 16> draw_owner_instance();

struct IdentityHash {
    std::size_t operator()(const CanonicalIdentity& id) const noexcept;
};

} // namespace canopy

template <>
struct std::hash<canopy::CanonicalIdentity> : canopy::IdentityHash {};
