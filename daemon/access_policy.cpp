#include "daemon/access_policy.h"

#include "daemon/supervisor.h"

#include <algorithm>
#include <cstring>

namespace canopy::daemon {

AccessPolicy::AccessPolicy(uid_t daemon_uid, std::vector<std::uint32_t> admin_uids,
                           std::vector<std::uint32_t> admin_gids)
    : daemon_uid_(daemon_uid), admin_uids_(std::move(admin_uids)), admin_gids_(std::move(admin_gids)) {}

bool AccessPolicy::is_admin(const Peer& peer) const {
    return peer.uid == ROOT_UID || peer.uid == daemon_uid_ ||
           std::find(admin_uids_.begin(), admin_uids_.end(), peer.uid) != admin_uids_.end() ||
           std::find(admin_gids_.begin(), admin_gids_.end(), peer.gid) != admin_gids_.end();
}

void AccessPolicy::require_admin(const Peer& peer, std::string_view action) const {
    if (!is_admin(peer)) {
        throw RequestError(ErrorCode::UNAUTHORIZED,
                           std::string(action) + " needs an admin: uid " + std::to_string(peer.uid) + " (gid " +
                               std::to_string(peer.gid) +
                               ") is neither the daemon's nor in control.admin_uids or control.admin_gids");
    }
}

AccessPolicy::Key AccessPolicy::key_of(const CanonicalIdentity& id) noexcept {
    Key key{};
    std::memcpy(key.data(), &id, key.size());
    return key;
}

void AccessPolicy::set_owner(const CanonicalIdentity& id, uid_t uid) {
    std::lock_guard lock(mu_);
    owners_[key_of(id)] = uid;
}

void AccessPolicy::forget(const CanonicalIdentity& id) {
    std::lock_guard lock(mu_);
    owners_.erase(key_of(id));
}

std::optional<uid_t> AccessPolicy::owner(const CanonicalIdentity& id) const {
    std::lock_guard lock(mu_);
    const auto it = owners_.find(key_of(id));
    return it == owners_.end() ? std::nullopt : std::optional<uid_t>(it->second);
}

void AccessPolicy::require_owner(const Peer& peer, const CanonicalIdentity& id, const std::string& where,
                                 std::string_view what) const {
    if (is_admin(peer)) {
        return; // no table lookup on the path of the daemon's own uid and the admins
    }
    const auto uid = owner(id);
    if (!uid || *uid == peer.uid) {
        return;
    }
    throw RequestError(ErrorCode::ACCESS_DENIED, where + ": buffer " + to_string(id) + " belongs to uid " +
                                                     std::to_string(*uid) + "; uid " + std::to_string(peer.uid) +
                                                     " may not " + std::string(what) + " it");
}

} // namespace canopy::daemon
