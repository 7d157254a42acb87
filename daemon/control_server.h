#pragma once
// ControlServer: the daemon's Unix-domain control socket (docs/control-protocol.md), served with
// Boost.Asio on one io_context thread.
//
// Each connection is a Session: it reads length-prefixed JSON frames, checks the peer's credentials
// (SO_PEERCRED) once against the allow lists, hands each request to the RequestHandler and writes the
// replies in request order. A frame whose length is out of bounds gets a BAD_REQUEST reply and the
// connection is closed; a body that is not a JSON object gets a BAD_REQUEST reply and the connection
// stays open. A session reads no further request while MAX_PENDING replies are outstanding, so a client
// that does not read cannot make the daemon buffer without bound. A bad or slow client affects only its
// own connection.
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
#include <nlohmann/json.hpp>
#include <set>
#include <sys/types.h>
#include <vector>

namespace canopy::daemon {

struct Peer {
    pid_t pid = -1;
    uid_t uid = 0;
    gid_t gid = 0;
};

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
    bool serialized() const noexcept { return serialized_; }
    nlohmann::json& json() noexcept { return json_; }
    const std::string& members_text() const noexcept { return members_; }

private:
    nlohmann::json json_;
    std::string members_;
    bool serialized_ = false;
};

using Reply = std::function<void(Response)>;

// Handles one request; calls `reply` exactly once, now or later, from any thread.
using RequestHandler = std::function<void(const nlohmann::json& request, const Peer& peer, Reply reply)>;

struct ControlOptions {
    std::filesystem::path socket;
    std::vector<std::uint32_t> allow_uids; // besides the daemon's own uid
    std::vector<std::uint32_t> allow_gids;
    std::uint32_t max_frame_bytes = 1u << 20;
};

// {"ok": false, "error": {"code", "message"}}.
nlohmann::json error_reply(std::string_view code, const std::string& message);

class ControlServer {
public:
    static constexpr std::size_t MAX_PENDING = 64;

    ControlServer(boost::asio::io_context& io, ControlOptions options, RequestHandler handler);
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

    boost::asio::io_context& io_;
    ControlOptions options_;
    RequestHandler handler_;
    boost::asio::local::stream_protocol::acceptor acceptor_;
    std::set<std::shared_ptr<Session>> sessions_; // touched on the io thread only
    bool stopped_ = false;
};

} // namespace canopy::daemon
