// CanonicalIdentity: the gate, the string form and its parser, slots, hashing and the owner nonce.

#include "tests/protocol/support.h"

#include <random>
#include <set>
#include <string>
#include <unordered_set>

using namespace canopy;

namespace {

constexpr std::string_view OWNER = "00112233445566778899aabbccddeeff";

std::string with_owner(std::string_view rest) {
    return std::string(OWNER) + std::string(rest);
}

CanonicalIdentity random_identity(std::mt19937_64& rng) {
    CanonicalIdentity id{};
    const std::uint64_t hi = rng();
    const std::uint64_t lo = rng() | 1; // never all zero
    for (std::size_t i = 0; i < 8; ++i) {
        id.owner_instance[i] = static_cast<std::uint8_t>(hi >> (8 * i));
        id.owner_instance[8 + i] = static_cast<std::uint8_t>(lo >> (8 * i));
    }
    switch (rng() % 4) {
    case 0:
        id.buffer_id = rng() % 10;
        break;
    case 1:
        id.buffer_id = UINT64_MAX - rng() % 3;
        break;
    default:
        id.buffer_id = rng() >> (rng() % 64);
    }
    id.generation = static_cast<std::uint32_t>(rng() % 3 == 0 ? UINT32_MAX - rng() % 3 : 1 + rng() % 1000);
    return id;
}

} // namespace

TEST_CASE("an identity prints as owner hex, buffer id and generation", "[protocol]") {
    CanonicalIdentity id{};
    for (std::size_t i = 0; i < 16; ++i) {
        id.owner_instance[i] = static_cast<std::uint8_t>(0x11 * i);
    }
    id.buffer_id = 42;
    id.generation = 1;
    CHECK(to_string(id) == "00112233445566778899aabbccddeeff.42.1");
    CHECK(parse_identity("00112233445566778899aabbccddeeff.42.1") == id);
}

TEST_CASE("identity strings round-trip for random identities", "[protocol]") {
    std::mt19937_64 rng(20261129);
    for (int i = 0; i < 5000; ++i) {
        const CanonicalIdentity id = random_identity(rng);
        const std::string text = to_string(id);
        CAPTURE(text);
        const CanonicalIdentity back = parse_identity(text);
        REQUIRE(back == id);
        REQUIRE(to_string(back) == text);
    }
}

TEST_CASE("parse_identity accepts the extremes of each number", "[protocol]") {
    const CanonicalIdentity id = parse_identity(with_owner(".18446744073709551615.4294967295"));
    CHECK(id.buffer_id == UINT64_MAX);
    CHECK(id.generation == UINT32_MAX);
    CHECK(id.reserved == 0);
    CHECK(parse_identity(with_owner(".0.1")).buffer_id == 0);
}

TEST_CASE("parse_identity refuses malformed spellings", "[protocol]") {
    const std::vector<std::string> refused = {
        "",
        ".",
        "..",
        with_owner(""),
        with_owner(".42"),
        with_owner(".42."),
        with_owner("..1"),
        with_owner(".42.1."),
        with_owner(".42.1.0"),
        with_owner(".4.2.1"),
        "00112233445566778899AABBCCDDEEFF.42.1",           // upper-case hex
        "00112233445566778899aabbccddeeF0.42.1",           // one upper-case digit
        "0112233445566778899aabbccddeeff.42.1",            // 31 hex digits
        "000112233445566778899aabbccddeeff.42.1",          // 33 hex digits
        "0x112233445566778899aabbccddeeff.42.1",           // prefix
        "00112233445566778899aabbccddeefg.42.1",           // not hex
        with_owner(".042.1"),                              // leading zero in buffer id
        with_owner(".00.1"),                               // leading zero in buffer id
        with_owner(".42.01"),                              // leading zero in generation
        with_owner(".42.4294967296"),                      // generation 2^32
        with_owner(".42.99999999999"),                     // generation far past 2^32
        with_owner(".18446744073709551616.1"),             // buffer id 2^64
        with_owner(".184467440737095516150.1"),            // buffer id far past 2^64
        with_owner(".+42.1"),                              // sign
        with_owner(".-42.1"),                              // sign
        with_owner(".42.+1"),                              // sign
        with_owner(".42.-1"),                              // sign
        " " + with_owner(".42.1"),                         // leading space
        with_owner(".42.1 "),                              // trailing space
        with_owner(". 42.1"),                              // space inside
        with_owner(".42 .1"),                              // space inside
        with_owner(".42.1\n"),                             // newline
        with_owner(".4e1.1"),                              // exponent
        with_owner(std::string(".42.1\0", 6)),             // embedded NUL
        "00112233445566778899aabbccddeeff:42:1",           // wrong separator
        "00112233-4455-6677-8899-aabbccddeeff.42.1",       // uuid spelling
        std::string(OWNER.substr(0, 16)) + "." + "42.1",   // half an owner
        std::string(OWNER) + std::string(OWNER) + ".42.1", // two owners
    };
    for (const std::string& text : refused) {
        CAPTURE(text);
        REQUIRE_WIRE_ERROR(parse_identity(text), ErrorCode::INVALID_DESCRIPTOR, "identity");
    }
}

TEST_CASE("parse_identity refuses generation 0", "[protocol]") {
    REQUIRE_WIRE_ERROR(parse_identity(with_owner(".42.0")), ErrorCode::INVALID_DESCRIPTOR, "identity.generation");
}

TEST_CASE("parse_identity refuses an all-zero owner", "[protocol]") {
    REQUIRE_WIRE_ERROR(parse_identity("00000000000000000000000000000000.42.1"), ErrorCode::INVALID_DESCRIPTOR,
                       "identity.owner_instance");
}

TEST_CASE("parse_identity quotes a bounded part of what it refuses", "[protocol]") {
    const std::string long_text(10000, 'a');
    const WireError e = REQUIRE_WIRE_ERROR(parse_identity(long_text), ErrorCode::INVALID_DESCRIPTOR, "identity");
    CHECK(e.problem().size() < 200);
}

TEST_CASE("validate_identity accepts a valid identity", "[protocol]") {
    CHECK_NOTHROW(validate_identity(test::identity()));
    CHECK_NOTHROW(validate_identity(test::identity(0x80, 0, UINT32_MAX)));
}

TEST_CASE("validate_identity rejects an all-zero owner instance", "[protocol]") {
    CanonicalIdentity id = test::identity();
    id.owner_instance = {};
    REQUIRE_WIRE_ERROR(validate_identity(id), ErrorCode::INVALID_DESCRIPTOR, "identity.owner_instance");
    id.owner_instance[15] = 1;
    CHECK_NOTHROW(validate_identity(id));
}

TEST_CASE("validate_identity rejects generation 0", "[protocol]") {
    CanonicalIdentity id = test::identity();
    id.generation = 0;
    REQUIRE_WIRE_ERROR(validate_identity(id), ErrorCode::INVALID_DESCRIPTOR, "identity.generation");
}

TEST_CASE("validate_identity rejects non-zero reserved bytes", "[protocol]") {
    CanonicalIdentity id = test::identity();
    id.reserved = 0x100;
    REQUIRE_WIRE_ERROR(validate_identity(id), ErrorCode::INVALID_DESCRIPTOR, "identity.reserved");
}

TEST_CASE("validate_identity_as prefixes the field and carries the code", "[protocol]") {
    CanonicalIdentity id = test::identity();
    id.reserved = 1;
    REQUIRE_WIRE_ERROR(validate_identity_as(id, ErrorCode::STALE_BUFFER, "args[0].buffer."), ErrorCode::STALE_BUFFER,
                       "args[0].buffer.identity.reserved");
}

TEST_CASE("same_slot ignores the generation only", "[protocol]") {
    const CanonicalIdentity a = test::identity(1, 10, 1);
    CHECK(same_slot(a, test::identity(1, 10, 2)));
    CHECK(same_slot(a, a));
    CHECK_FALSE(same_slot(a, test::identity(1, 11, 1)));
    CHECK_FALSE(same_slot(a, test::identity(2, 10, 1)));
    CHECK_FALSE(a == test::identity(1, 10, 2));
}

TEST_CASE("identities hash consistently with equality", "[protocol]") {
    std::mt19937_64 rng(7);
    std::unordered_set<CanonicalIdentity> set;
    std::set<std::size_t> hashes;
    std::vector<CanonicalIdentity> ids;
    for (int i = 0; i < 2000; ++i) {
        ids.push_back(random_identity(rng));
        set.insert(ids.back());
        hashes.insert(IdentityHash{}(ids.back()));
    }
    CHECK(set.size() == ids.size());
    CHECK(hashes.size() >= ids.size() - 2);
    for (const CanonicalIdentity& id : ids) {
        CanonicalIdentity copy = id;
        CHECK(std::hash<CanonicalIdentity>{}(copy) == IdentityHash{}(id));
        CHECK(set.count(copy) == 1);
    }
}

TEST_CASE("draw_owner_instance gives distinct non-zero nonces", "[protocol]") {
    std::set<std::array<std::uint8_t, 16>> seen;
    for (int i = 0; i < 1000; ++i) {
        const auto nonce = draw_owner_instance();
        CHECK(nonce != std::array<std::uint8_t, 16>{});
        seen.insert(nonce);
    }
    CHECK(seen.size() == 1000);
}
