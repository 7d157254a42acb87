#pragma once
// ControlServer: the daemon's Unix-domain control socket (docs/control-protocol.md), served with
// Boost.Asio on one io_context thread.
//
// Each connection is a Session: it reads length-prefixed JSON frames, checks the peer's credentials
// (SO_PEERCRED) once against the allow lists, hands each request to the RequestHandler and writes the
// replies in request order. A frame whose length is out of bounds gets a BAD_REQUEST reply and the
// connection is closed; a body that is not a JSON object gets a BAD_REQUEST reply and the connection
// stays open. Every input is bounded by ControlLimits:
//   - at most max_sessions connections are open (the daemon's own uid and root may open own_uid_reserve
//     more); one more gets a BAD_REQUEST frame at once and is closed;
//   - a session reads no further request while MAX_PENDING replies are owed or max_queued_reply_bytes of
//     replies wait to be written, so a client that does not read cannot make the daemon buffer without
//     bound; it reads on once the client has read enough;
//   - a frame must arrive whole within frame_timeout of its first byte (or of the session reading again
//     after such a pause), else a BAD_REQUEST reply and the connection is closed;
//   - a session that owes no reply and holds no part of a frame is closed after idle_timeout without a
//     request. A session waiting for a reply (a long `wait`) is never timed out;
//   - a request of an op in ControlOptions::attachment_ops may be followed by an attachment of raw bytes
//     ("attachment": N, at most max_attachment_bytes, else a BAD_REQUEST reply and the connection is closed),
//     which its handler reads or discards (daemon/attachment.h); no byte of it may be missing for frame_timeout
//     while the session reads it, else a BAD_REQUEST frame and the connection is closed. An attachment on any
//     other op is discarded with a BAD_REQUEST reply. A reply may carry an attachment too, written right after
//     its frame.
// A failed accept (no file descriptor left) pauses accepting for accept_backoff (AcceptBackoff). A bad or
// slow client affects only its own connection.
//
// Thread safety: start/stop from the thread that owns the server; a handler's `reply` callback may run on
// any thread (it posts to the io_context).

#include <cstdint>
#include <filesystem>
#include <functional>
#include <memory>
// clang-format off
#include <utility> // Boost 1.74's Asio needs it first under C++20
#include <boost/asio.hpp>
// clang-format on
#include "config/config.h"
#include "daemon/accept_backoff.h"
#include "daemon/attachment.h"
#include "ipc/unique_fd.h"

#include <chrono>
#include <nlohmann/json.hpp>
#include <set>
#include <spdlog/logger.h>
#include <sys/types.h>
#include <vector>

namespace canopy::daemon {

struct Peer {
    pid_t pid = -1;
    uid_t uid = 0;
    gid_t gid = 0;
};

// Root may use every daemon, whatever uid the daemon runs as (a service user such as `canopy`), and is always
// an admin (AccessPolicy): it can signal the daemon and read its memory anyway, and `canopy shutdown` as root is
// how an operator stops a daemon that runs as another user.
inline constexpr uid_t ROOT_UID = 0;

// A reply: a JSON object, or the members of a successful one already serialized. Replies that list many
// tasks take the second form, which spares building a JSON tree per task only to print it.
class Response {
public:
    Response(nlohmann::json object) : json_(std::move(object)) {} // NOLINT(google-explicit-constructor)
    // `members` is the text between the braces of an {"ok": true, ...} reply, e.g. `"tasks":[...]`.
    static Response members(std::string members) {
        Response r{nlohmann::json()};
        r.members_ = std::move(members);
        r.serialized_ = true;
        return r;
    }
    // A frame sent before the final reply, {"id": ..., "progress": PROGRESS} (no "ok"): written only while its
    // request is the oldest one unanswered on its connection and the connection's reply budget has room,
    // else dropped; a handler may send any number of them before its final reply.
    static Response progress(nlohmann::json progress) {
        Response r{std::move(progress)};
        r.interim_ = true;
        return r;
    }
    // File descriptors sent with the reply's first byte (SCM_RIGHTS, at most ipc::MAX_FDS_PER_MESSAGE); the
    // reply holds them until that byte is sent, then closes its copies.
    Response& attach(std::vector<ipc::UniqueFd> fds) {
        fds_ = std::make_shared<const std::vector<ipc::UniqueFd>>(std::move(fds));
        return *this;
    }
    const std::shared_ptr<const std::vector<ipc::UniqueFd>>& fds() const noexcept { return fds_; }
    // Raw bytes written right after the reply frame, whose JSON says how many ("attachment": N).
    Response& attach_bytes(std::shared_ptr<OutboundAttachment> bytes) {
        bytes_ = std::move(bytes);
        return *this;
    }
    const std::shared_ptr<OutboundAttachment>& bytes() const noexcept { return bytes_; }
    bool serialized() const noexcept { return serialized_; }
    bool interim() const noexcept { return interim_; }
    nlohmann::json& json() noexcept { return json_; }
    const std::string& members_text() const noexcept { return members_; }

private:
    nlohmann::json json_;
    std::string members_;
    std::shared_ptr<const std::vector<ipc::UniqueFd>> fds_;
    std::shared_ptr<OutboundAttachment> bytes_;
    bool serialized_ = false;
    bool interim_ = false;
};

using Reply = std::function<void(Response)>;

struct RawRun; // daemon/run_request.h

// Handles one request; calls `reply` with its final response exactly once, now or later, from any thread, after
// any number of Response::progress frames. `attachment` is the request's inbound attachment, or null. `run` is
// the tasks of a run or submit request the fast path read (daemon/run_request.h), or null; the handler may move
// from it.
using RequestHandler = std::function<void(const nlohmann::json& request, RawRun* run, const Peer& peer, Reply reply,
                                          Attachment attachment)>;

// The bounds of the control socket; docs/control-protocol.md "Limits" states each default.
// The defaults are the config's (config::ControlConfig, docs/config.md), except the own-uid reserve and the accept
// back-off, which are fixed.
struct ControlLimits {
    // Connections open at once; one more gets a BAD_REQUEST frame and is closed.
    std::size_t max_sessions = config::ControlConfig{}.max_connections;
    // Connections of the daemon's own uid and of root accepted past max_sessions.
    std::size_t own_uid_reserve = 16;
    // From the first byte of a frame to its last, while the session reads.
    std::chrono::milliseconds frame_timeout = config::ControlConfig{}.frame_timeout;
    // Without a request, for a session that owes no reply and holds no part of a frame.
    std::chrono::milliseconds idle_timeout = config::ControlConfig{}.idle_timeout;
    // Bytes of replies a session queues (written or waiting for an earlier one) before it reads no further
    // request.
    std::size_t max_queued_reply_bytes = config::ControlConfig{}.max_queued_reply_bytes;
    // Raw bytes one request may carry after its frame.
    std::uint64_t max_attachment_bytes = config::ControlConfig{}.max_attachment_bytes;
    // Pause after a failed accept.
    std::chrono::milliseconds accept_backoff{100};
};

struct ControlOptions {
    std::filesystem::path socket;
    std::vector<std::uint32_t> allow_uids; // besides the daemon's own uid and ROOT_UID
    std::vector<std::uint32_t> allow_gids;
    std::uint32_t max_frame_bytes = 1u << 20;
    ControlLimits limits{};
    // The ops whose requests may carry an inbound attachment.
    std::vector<std::string> attachment_ops{"buffer.write"};
};

// {"ok": false, "error": {"code", "message"}}.
nlohmann::json error_reply(std::string_view code, const std::string& message);

class ControlServer {
public:
    // Requests a session has in hand (read, reply not yet queued for writing) before it reads no further one.
    static constexpr std::size_t MAX_PENDING = 64;

    ControlServer(boost::asio::io_context& io, ControlOptions options, RequestHandler handler,
                  std::shared_ptr<spdlog::logger> log);
    ~ControlServer();

    // Binds and listens (an existing socket file is replaced; the file is made 0666, access being
    // decided by SO_PEERCRED), then accepts. Throws std::system_error naming the path.
    void start();
    // Stops accepting new connections and removes the socket file; open connections keep being served.
    void stop_accepting();
    // stop_accepting(), then closes every connection once the replies already queued on it are written.
    void stop();

    bool allowed(const Peer& peer) const;
    std::size_t connections() const;

private:
    class Session;
    void do_accept();
    // Serves an accepted connection, or refuses it when max_sessions (and the reserve) are taken.
    void admit(boost::asio::local::stream_protocol::socket socket);
    void refuse_over_limit(boost::asio::local::stream_protocol::socket& socket, const Peer& peer);
    void forget(const std::shared_ptr<Session>& session);
    // Every sweep_interval_ while sessions are open: closes those past a frame or idle timeout.
    void schedule_sweep();
    void sweep();

    boost::asio::io_context& io_;
    ControlOptions options_;
    RequestHandler handler_;
    std::shared_ptr<spdlog::logger> log_;
    boost::asio::local::stream_protocol::acceptor acceptor_;
    AcceptBackoff backoff_;
    boost::asio::steady_timer sweep_timer_;
    std::chrono::milliseconds sweep_interval_;
    bool sweeping_ = false;
    bool full_logged_ = false;                    // the warning of the current run of refusals over max_sessions is out
    std::set<std::shared_ptr<Session>> sessions_; // touched on the io thread only
    bool stopped_ = false;
};

} // namespace canopy::daemon
