#pragma once
// AccessPolicy: who may do what once a peer is allowed on the control socket. Admins (root, the daemon's own
// uid, control.admin_uids, and peers whose gid is in control.admin_gids) may do everything; shutdown, module
// loads and worker restarts are theirs alone. A buffer belongs to the uid that created it: only its owner or
// an admin may read or write its bytes, release it, or name it in a task. Buffers the daemon made itself
// (preloaded arenas, module images) have no owner and are open to every allowed peer.
//
// Thread safety: every method may be called from any thread (the owner table has its own mutex).

#include "daemon/control_server.h"
#include "protocol/identity.h"

#include <array>
#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <vector>

namespace canopy::daemon {

class AccessPolicy {
public:
    AccessPolicy(uid_t daemon_uid, std::vector<std::uint32_t> admin_uids, std::vector<std::uint32_t> admin_gids);

    bool is_admin(const Peer& peer) const;
    // Throws RequestError(UNAUTHORIZED) "ACTION needs an admin: uid U (gid G) is not one ..." unless admin.
    void require_admin(const Peer& peer, std::string_view action) const;

    void set_owner(const CanonicalIdentity& id, uid_t uid);
    void forget(const CanonicalIdentity& id);
    std::optional<uid_t> owner(const CanonicalIdentity& id) const;
    // Throws RequestError(ACCESS_DENIED) "WHERE: buffer NAME belongs to uid O; uid U may not WHAT it" unless
    // the peer owns the buffer, is an admin, or the buffer has no owner.
    void require_owner(const Peer& peer, const CanonicalIdentity& id, const std::string& where,
                       std::string_view what) const;

private:
    uid_t daemon_uid_;
    std::vector<std::uint32_t> admin_uids_;
    std::vector<std::uint32_t> admin_gids_;
    // An identity's 32 bytes, compared as such: no text is made per lookup.
    using Key = std::array<unsigned char, sizeof(CanonicalIdentity)>;
    static Key key_of(const CanonicalIdentity& id) noexcept;

    mutable std::mutex mu_;
    std::map<Key, uid_t> owners_;
};

} // namespace canopy::daemon
