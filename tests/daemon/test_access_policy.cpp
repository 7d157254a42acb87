// AccessPolicy without a daemon: who is an admin, and who may use a buffer that has an owner.
#include "daemon/access_policy.h"
#include "daemon/supervisor.h"

#include <catch2/catch.hpp>

using canopy::CanonicalIdentity;
using canopy::ErrorCode;
using canopy::daemon::AccessPolicy;
using canopy::daemon::Peer;
using canopy::daemon::RequestError;

namespace {

// A daemon running as a service user (uid 999), as the shipped unit runs it.
constexpr uid_t DAEMON = 999;

Peer peer(uid_t uid, gid_t gid) {
    return Peer{4242, uid, gid};
}

CanonicalIdentity identity(std::uint64_t buffer_id) {
    CanonicalIdentity id{};
    id.owner_instance[0] = 0x11;
    id.buffer_id = buffer_id;
    id.generation = 1;
    return id;
}

// The code and message of what `f` throws; fails when it throws nothing.
template <typename F>
std::pair<ErrorCode, std::string> refusal(F&& f) {
    try {
        f();
    } catch (const RequestError& e) {
        return {e.code(), e.what()};
    }
    FAIL("no RequestError was thrown");
    return {};
}

} // namespace

TEST_CASE("the access policy makes root an admin of a daemon that runs as another uid", "[daemon][access]") {
    AccessPolicy policy(DAEMON, {}, {});
    CHECK(policy.is_admin(peer(0, 0)));
    CHECK(policy.is_admin(peer(0, 1000))); // whatever its gid
    CHECK_NOTHROW(policy.require_admin(peer(0, 0), "shutdown"));
    // Root reads and writes a buffer another uid owns, as every admin does.
    policy.set_owner(identity(3), 1000);
    CHECK_NOTHROW(policy.require_owner(peer(0, 0), identity(3), "buffer.read", "read the bytes of"));
}

TEST_CASE("the access policy's admins are the daemon's uid, admin_uids and admin_gids and nobody else",
          "[daemon][access]") {
    const AccessPolicy policy(DAEMON, {1001}, {2000});
    CHECK(policy.is_admin(peer(DAEMON, DAEMON)));
    CHECK(policy.is_admin(peer(1001, 1001)));
    CHECK(policy.is_admin(peer(1002, 2000)));
    CHECK_FALSE(policy.is_admin(peer(1000, 1000)));
    CHECK_FALSE(policy.is_admin(peer(1000, 0))); // gid 0 is no admin gid unless admin_gids names it

    const auto [code, message] = refusal([&] { policy.require_admin(peer(1000, 1000), "shutdown"); });
    CHECK(code == ErrorCode::UNAUTHORIZED);
    CHECK(message == "shutdown needs an admin: uid 1000 (gid 1000) is neither the daemon's nor in "
                     "control.admin_uids or control.admin_gids");
}

TEST_CASE("the access policy gives a buffer with an owner to it and the admins, one without to everyone",
          "[daemon][access]") {
    AccessPolicy policy(DAEMON, {}, {});
    policy.set_owner(identity(3), 1000);
    CHECK(policy.owner(identity(3)) == 1000u);
    CHECK_NOTHROW(policy.require_owner(peer(1000, 1000), identity(3), "buffer.read", "read the bytes of"));
    CHECK_NOTHROW(policy.require_owner(peer(DAEMON, DAEMON), identity(3), "buffer.read", "read the bytes of"));

    const auto [code, message] =
        refusal([&] { policy.require_owner(peer(1001, 1001), identity(3), "buffer.read", "read the bytes of"); });
    CHECK(code == ErrorCode::ACCESS_DENIED);
    CHECK(message == "buffer.read: buffer 11000000000000000000000000000000.3.1 belongs to uid 1000; uid 1001 may "
                     "not read the bytes of it");

    // Without an owner (a preloaded arena), and once forgotten, any allowed peer may.
    CHECK_NOTHROW(policy.require_owner(peer(1001, 1001), identity(4), "buffer.read", "read the bytes of"));
    policy.forget(identity(3));
    CHECK_FALSE(policy.owner(identity(3)).has_value());
    CHECK_NOTHROW(policy.require_owner(peer(1001, 1001), identity(3), "buffer.read", "read the bytes of"));
}
