#include "daemon/control_server.h"

#include "daemon/request_json.h"
#include "ipc/fd_passing.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <optional>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace canopy::daemon {

namespace asio = boost::asio;
using stream = asio::local::stream_protocol;
using Clock = std::chrono::steady_clock;

nlohmann::json error_reply(std::string_view code, const std::string& message) {
    return {{"ok", false}, {"error", {{"code", code}, {"message", message}}}};
}

namespace {

// The fds a reply carries, shared by the reply and the frame that sends them.
using Fds = std::shared_ptr<const std::vector<ipc::UniqueFd>>;

// A frame: the 4-byte little-endian length, then `body`.
std::string frame_of(const std::string& body) {
    std::string frame(4, '\0');
    const auto len = static_cast<std::uint32_t>(body.size());
    for (int i = 0; i < 4; ++i) {
        frame[static_cast<std::size_t>(i)] = static_cast<char>((len >> (8 * i)) & 0xff);
    }
    frame += body;
    return frame;
}

std::string dump(const nlohmann::json& reply) {
    return reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<Peer> peer_of(int fd) {
    ucred cred{};
    socklen_t len = sizeof cred;
    if (::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
        return std::nullopt;
    }
    return Peer{cred.pid, cred.uid, cred.gid};
}

} // namespace

class ControlServer::Session : public std::enable_shared_from_this<Session> {
public:
    Session(ControlServer& server, stream::socket socket, Peer peer)
        : server_(server), socket_(std::move(socket)), peer_(peer), idle_since_(Clock::now()) {}

    void start() {
        if (!server_.allowed(peer_)) {
            server_.log_->warn("control: refused pid {} uid {} gid {}: not in control.allow_uids or allow_gids",
                               peer_.pid, peer_.uid, peer_.gid);
            closing_ = true;
            enqueue_now(dump(error_reply("UNAUTHORIZED", "uid " + std::to_string(peer_.uid) + " (gid " +
                                                             std::to_string(peer_.gid) +
                                                             ") may not use this daemon; see control.allow_uids")));
            return;
        }
        resume();
    }

    // Closes once every reply already queued has been written; an idle session closes at once.
    void close_when_idle() {
        closing_ = true;
        boost::system::error_code ignored;
        socket_.shutdown(stream::socket::shutdown_receive, ignored);
        if (!writing_) {
            close();
        }
    }

    void close() {
        if (closed_) {
            return;
        }
        closed_ = true;
        boost::system::error_code ignored;
        socket_.shutdown(stream::socket::shutdown_both, ignored);
        socket_.close(ignored);
        server_.forget(shared_from_this());
    }

    // Closes the session when it waits for the client past a timeout of ControlLimits (see the header).
    void check_deadlines(Clock::time_point now) {
        if (!reading_ || closing_ || closed_) {
            return; // not waiting for the client: it owes nothing while the session does not read
        }
        const ControlLimits& limits = server_.options_.limits;
        const std::size_t buffered = filled_ - consumed_;
        if (buffered > 0 && now - frame_since_ >= limits.frame_timeout) {
            fail_incomplete_frame(buffered);
        } else if (buffered == 0 && pending_ == 0 && !writing_ && now - idle_since_ >= limits.idle_timeout) {
            server_.log_->debug("control: closing the connection of pid {} uid {}: no request for {} ms", peer_.pid,
                                peer_.uid, limits.idle_timeout.count());
            close();
        }
    }

private:
    // Reads no further request while this many reply bytes wait to be written or for an earlier reply.
    bool paused() const noexcept {
        return pending_ >= MAX_PENDING || out_bytes_ + done_bytes_ >= server_.options_.limits.max_queued_reply_bytes;
    }

    // Reads what the socket holds into in_ (one read can carry several frames, or part of one). At most
    // one read is outstanding, and none while paused() or the session is closing.
    void read_more() {
        if (reading_ || closing_ || closed_ || eof_) {
            return;
        }
        if (paused()) {
            if (!budget_logged_ && out_bytes_ + done_bytes_ >= server_.options_.limits.max_queued_reply_bytes) {
                budget_logged_ = true;
                server_.log_->debug("control: pid {} uid {} has {} bytes of replies queued; reading no further "
                                    "request until it reads them",
                                    peer_.pid, peer_.uid, out_bytes_ + done_bytes_);
            }
            paused_ = true;
            return;
        }
        if (paused_) {
            paused_ = false;
            frame_since_ = Clock::now(); // the part of a frame buffered is waited for from now on
        }
        // Keep the unread bytes at the front and room for at least READ_CHUNK more, or for the whole frame
        // that is partly buffered.
        if (consumed_ > 0) {
            std::memmove(in_.data(), in_.data() + consumed_, filled_ - consumed_);
            filled_ -= consumed_;
            consumed_ = 0;
        }
        std::size_t want = filled_ + READ_CHUNK;
        if (filled_ >= 4) {
            want = std::max<std::size_t>(want, 4 + std::size_t{frame_length(in_.data())});
        }
        if (in_.size() < want) {
            in_.resize(want);
        }
        reading_ = true;
        socket_.async_read_some(
            asio::buffer(in_.data() + filled_, in_.size() - filled_),
            [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) { self->on_read(ec, n); });
    }

    void on_read(const boost::system::error_code& ec, std::size_t n) {
        reading_ = false;
        if (ec) {
            finish_reading(); // end of stream; bytes of a frame left unread were a truncated frame
            return;
        }
        if (filled_ == consumed_) {
            frame_since_ = Clock::now(); // these bytes start a frame
        }
        filled_ += n;
        resume();
    }

    // Handles every whole frame buffered, as far as paused() allows, then reads on. A reply written from
    // inside a handler calls back here; the outer call carries on instead.
    void resume() {
        if (resuming_ || closed_) {
            return;
        }
        resuming_ = true;
        bool took = false;
        while (!closing_ && !paused() && take_frame()) {
            took = true;
        }
        if (took && filled_ > consumed_) {
            frame_since_ = Clock::now(); // the bytes left start the next frame
        }
        resuming_ = false;
        read_more();
    }

    static std::uint32_t frame_length(const char* p) {
        const auto* u = reinterpret_cast<const unsigned char*>(p);
        return std::uint32_t{u[0]} | std::uint32_t{u[1]} << 8 | std::uint32_t{u[2]} << 16 | std::uint32_t{u[3]} << 24;
    }

    // Handles the frame at the front of the buffered bytes; false when no whole frame is buffered.
    bool take_frame() {
        const std::size_t buffered = filled_ - consumed_;
        if (buffered < 4) {
            return false;
        }
        const std::uint32_t len = frame_length(in_.data() + consumed_);
        if (len < 2 || len > server_.options_.max_frame_bytes) {
            closing_ = true;
            enqueue_now(dump(error_reply("BAD_REQUEST", "frame length " + std::to_string(len) + " is outside 2.." +
                                                            std::to_string(server_.options_.max_frame_bytes) +
                                                            "; closing the connection")));
            return false;
        }
        if (buffered < 4 + std::size_t{len}) {
            return false;
        }
        const char* body = in_.data() + consumed_ + 4;
        ParsedRequest parsed = parse_request(std::string_view(body, len));
        const nlohmann::json& request = parsed.request;
        consumed_ += 4 + std::size_t{len}; // before the handler, which may call back into resume()
        const std::uint64_t seq = next_request_++;
        ++pending_;
        if (!parsed.error.empty()) {
            complete(seq, dump(error_reply("BAD_REQUEST", parsed.error)));
            return true;
        }
        // The request's "id", if any, as the JSON text the reply repeats.
        std::string id = request.contains("id") ? request["id"].dump() : std::string();
        auto weak = weak_from_this();
        auto& io = server_.io_;
        server_.handler_(request, peer_, [weak, seq, id = std::move(id), &io](Response reply) {
            // Always posted, never run inline: a reply is often given under the handler's own lock, and
            // completing it can admit the next buffered request, which would take that lock again.
            asio::post(io, [weak, seq, id, reply = std::move(reply)]() mutable {
                if (auto self = weak.lock()) {
                    if (reply.interim()) {
                        self->interim(seq, serialize_progress(reply, id));
                    } else {
                        auto fd = reply.fds();
                        self->complete(seq, serialize(std::move(reply), id), std::move(fd));
                    }
                }
            });
        });
        return true;
    }

    // The part of a frame buffered did not become whole within frame_timeout: the stream cannot be trusted.
    void fail_incomplete_frame(std::size_t buffered) {
        const ControlLimits& limits = server_.options_.limits;
        const std::string got =
            buffered < 4 ? std::to_string(buffered) + " of its 4 length bytes"
                         : std::to_string(buffered) + " of its " +
                               std::to_string(4 + std::uint64_t{frame_length(in_.data() + consumed_)}) + " bytes";
        server_.log_->info("control: closing the connection of pid {} uid {}: a frame incomplete after {} ms",
                           peer_.pid, peer_.uid, limits.frame_timeout.count());
        closing_ = true;
        boost::system::error_code ignored;
        socket_.shutdown(stream::socket::shutdown_receive, ignored); // ends the outstanding read
        enqueue_now(
            dump(error_reply("BAD_REQUEST", "frame incomplete after " + std::to_string(limits.frame_timeout.count()) +
                                                " ms: " + got + " arrived; closing the connection")));
    }

    // The body of a reply frame: "ok" (true unless the handler said otherwise) and the request's "id" added.
    static std::string serialize(Response reply, const std::string& id) {
        if (reply.serialized()) {
            std::string body = "{\"ok\":true";
            if (!id.empty()) {
                body += ",\"id\":" + id;
            }
            if (!reply.members_text().empty()) {
                body += ',';
                body += reply.members_text();
            }
            body += '}';
            return body;
        }
        nlohmann::json& object = reply.json();
        if (!object.contains("ok")) {
            object["ok"] = true;
        }
        if (!id.empty()) {
            object["id"] = nlohmann::json::parse(id);
        }
        return dump(object);
    }

    // {"progress": ..., "id": ...}: no "ok", so that a client tells it from the final reply.
    static std::string serialize_progress(Response& reply, const std::string& id) {
        std::string body = "{\"progress\":" + dump(reply.json());
        if (!id.empty()) {
            body += ",\"id\":" + id;
        }
        body += '}';
        return body;
    }

    // Writes a progress frame of request `seq` when it is the oldest unanswered one and the reply budget has
    // room; drops it otherwise (a later one, or the final reply, says more).
    void interim(std::uint64_t seq, const std::string& body) {
        if (seq == next_reply_ && !closing_ &&
            out_bytes_ + done_bytes_ + body.size() < server_.options_.limits.max_queued_reply_bytes) {
            enqueue_now(body);
        }
    }

    // Stores a reply (with the fd to send along, if any) and writes every reply that is next in request order.
    void complete(std::uint64_t seq, std::string reply, Fds fd = nullptr) {
        done_bytes_ += reply.size();
        done_.emplace(seq, Done{std::move(reply), std::move(fd)});
        while (!done_.empty() && done_.begin()->first == next_reply_) {
            Done& next = done_.begin()->second;
            done_bytes_ -= next.body.size();
            enqueue_now(next.body, std::move(next.fd));
            done_.erase(done_.begin());
            ++next_reply_;
            --pending_;
        }
        resume();
    }

    void enqueue_now(const std::string& body, Fds fd = nullptr) {
        out_.push_back({frame_of(body), std::move(fd)});
        out_bytes_ += out_.back().bytes.size();
        if (!writing_) {
            write_next();
        }
    }

    void write_next() {
        if (out_.empty()) {
            writing_ = false;
            if (closing_ || (eof_ && pending_ == 0)) {
                close();
            } else if (pending_ == 0) {
                idle_since_ = Clock::now();
            }
            return;
        }
        writing_ = true;
        if (out_.front().fd && !out_.front().fd->empty()) {
            write_with_fd();
            return;
        }
        asio::async_write(socket_, asio::buffer(out_.front().bytes),
                          [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                              if (ec) {
                                  self->close();
                                  return;
                              }
                              self->out_bytes_ -= self->out_.front().bytes.size();
                              self->out_.pop_front();
                              self->write_next();
                              self->resume(); // the reply budget may admit the next request
                          });
    }

    // The frame at the front carries an fd: one sendmsg puts it on the frame's first byte (waiting until the
    // socket takes a byte); the rest of the frame goes the usual way.
    void write_with_fd() {
        Out& front = out_.front();
        std::vector<int> fds;
        for (const ipc::UniqueFd& fd : *front.fd) {
            fds.push_back(fd.get());
        }
        const ssize_t n = ipc::send_some(socket_.native_handle(), std::as_bytes(std::span(front.bytes)), fds);
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            socket_.async_wait(stream::socket::wait_write,
                               [self = shared_from_this()](const boost::system::error_code& ec) {
                                   if (ec) {
                                       self->close();
                                       return;
                                   }
                                   self->write_with_fd();
                               });
            return;
        }
        if (n <= 0) {
            close();
            return;
        }
        front.fd.reset(); // on its way, with the bytes sent
        const auto sent = static_cast<std::size_t>(n);
        out_bytes_ -= sent;
        front.bytes.erase(0, sent);
        if (front.bytes.empty()) {
            out_.pop_front();
        }
        write_next();
        resume();
    }

    void finish_reading() {
        eof_ = true;
        reading_ = false;
        if (pending_ == 0 && !writing_) {
            close();
        }
    }

    ControlServer& server_;
    stream::socket socket_;
    Peer peer_;
    static constexpr std::size_t READ_CHUNK = 64 * 1024;
    std::vector<char> in_; // bytes read from the socket: [consumed_, filled_) are not handled yet
    std::size_t filled_ = 0;
    std::size_t consumed_ = 0;
    bool resuming_ = false;
    // A frame to write, and the fds its first byte carries (none once that byte is sent).
    struct Out {
        std::string bytes;
        Fds fd;
    };
    // A serialized reply waiting for an earlier one, with its fds.
    struct Done {
        std::string body;
        Fds fd;
    };
    std::deque<Out> out_;                // frames to write, the front one being written
    std::size_t out_bytes_ = 0;          // bytes of out_
    std::map<std::uint64_t, Done> done_; // replies waiting for an earlier one
    std::size_t done_bytes_ = 0;         // bytes of done_
    std::uint64_t next_request_ = 0;
    std::uint64_t next_reply_ = 0;
    std::size_t pending_ = 0;       // requests taken whose reply is not in out_ yet
    Clock::time_point frame_since_; // when the part of a frame buffered started to be waited for
    Clock::time_point idle_since_;  // when the session last owed nothing
    bool reading_ = false;
    bool writing_ = false;
    bool paused_ = false;        // read_more() found paused()
    bool budget_logged_ = false; // the reply budget stopped this session's reads once already
    bool closing_ = false;
    bool closed_ = false;
    bool eof_ = false;
};

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
        frame_of(dump(error_reply("BAD_REQUEST", "the daemon serves at most " + std::to_string(most) +
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
    const auto now = Clock::now();
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
