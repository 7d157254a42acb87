#include "daemon/control_server.h"

#include "daemon/control_session.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <optional>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace canopy::daemon {

namespace asio = boost::asio;
using stream = asio::local::stream_protocol;

nlohmann::json error_reply(std::string_view code, const std::string& message) {
    return {{"ok", false}, {"error", {{"code", code}, {"message", message}}}};
}

namespace {

std::optional<Peer> peer_of(int fd) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        return std::nullopt;
    }
    return Peer{cred.pid, cred.uid, cred.gid};
}

} // namespace

ControlServer::ControlServer(asio::io_context& io, ControlOptions options, RequestHandler handler,
                             std::shared_ptr<spdlog::logger> log)
    : io_(io), options_(std::move(options)), handler_(std::move(handler)), log_(std::move(log)), acceptor_(io),
      backoff_(io, "control socket " + options_.socket.string(), options_.limits.accept_backoff, log_),
      sweep_timer_(io),
      sweep_interval_(std::clamp(std::min(options_.limits.frame_timeout, options_.limits.idle_timeout) / 4,
                                 std::chrono::milliseconds(10), std::chrono::milliseconds(1000))) {}

ControlServer::~ControlServer() = default;

void ControlServer::start() {
    std::error_code ec;
    std::filesystem::create_directories(options_.socket.parent_path(), ec);
    ::unlink(options_.socket.c_str());
    const stream::endpoint endpoint(options_.socket.string());
    acceptor_.open(endpoint.protocol());
    acceptor_.bind(endpoint);
    ::chmod(options_.socket.c_str(), 0666);
    acceptor_.listen();
    do_accept();
}

void ControlServer::do_accept() {
    backoff_.accept_loop(acceptor_, stopped_, [this](stream::socket socket) { admit(std::move(socket)); });
}

void ControlServer::admit(stream::socket socket) {
    const auto peer = peer_of(socket.native_handle());
    if (!peer) {
        return; // the peer is gone already
    }
    const ControlLimits& limits = options_.limits;
    const bool own = peer->uid == ::geteuid() || peer->uid == ROOT_UID;
    if (sessions_.size() >= limits.max_sessions + (own ? limits.own_uid_reserve : 0)) {
        refuse_over_limit(socket, *peer);
        return;
    }
    auto session = std::make_shared<Session>(*this, std::move(socket), *peer);
    sessions_.insert(session);
    schedule_sweep();
    session->start();
}

void ControlServer::refuse_over_limit(stream::socket& socket, const Peer& peer) {
    const std::size_t most = options_.limits.max_sessions;
    if (!full_logged_) {
        full_logged_ = true;
        log_->warn("control socket {}: {} connections open, the most it serves; refusing new ones until one closes",
                   options_.socket.string(), sessions_.size());
    }
    log_->debug("control: refused a connection of pid {} uid {}: {} connections open", peer.pid, peer.uid,
                sessions_.size());
    // A fresh socket's send buffer takes a short frame whole: the client reads it as the reply to its first
    // request.
    const std::string frame =
        frame_of(dump_reply(error_reply("BAD_REQUEST", "the daemon serves at most " + std::to_string(most) +
                                                           " connections at once (control socket); closing this one")));
    (void)::send(socket.native_handle(), frame.data(), frame.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    boost::system::error_code ignored;
    socket.close(ignored);
}

void ControlServer::forget(const std::shared_ptr<Session>& session) {
    sessions_.erase(session);
    if (sessions_.size() < options_.limits.max_sessions) {
        full_logged_ = false;
    }
}

void ControlServer::schedule_sweep() {
    if (sweeping_ || sessions_.empty()) {
        return;
    }
    sweeping_ = true;
    sweep_timer_.expires_after(sweep_interval_);
    sweep_timer_.async_wait([this](const boost::system::error_code& ec) {
        sweeping_ = false;
        if (!ec) {
            sweep();
        }
    });
}

void ControlServer::sweep() {
    const auto now = std::chrono::steady_clock::now();
    // A session may close itself, leaving sessions_.
    const std::vector<std::shared_ptr<Session>> open(sessions_.begin(), sessions_.end());
    for (const auto& s : open) {
        s->check_deadlines(now);
    }
    schedule_sweep();
}

void ControlServer::stop_accepting() {
    if (stopped_) {
        return;
    }
    stopped_ = true;
    backoff_.cancel();
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    ::unlink(options_.socket.c_str());
}

void ControlServer::stop() {
    stop_accepting();
    sweep_timer_.cancel();
    auto sessions = sessions_;
    for (const auto& s : sessions) {
        s->close_when_idle();
    }
}

bool ControlServer::allowed(const Peer& peer) const {
    if (peer.uid == ::geteuid() || peer.uid == ROOT_UID) {
        return true;
    }
    const auto& uids = options_.allow_uids;
    const auto& gids = options_.allow_gids;
    return std::find(uids.begin(), uids.end(), peer.uid) != uids.end() ||
           std::find(gids.begin(), gids.end(), peer.gid) != gids.end();
}

std::size_t ControlServer::connections() const {
    return sessions_.size();
}

} // namespace canopy::daemon
