#include "daemon/control_server.h"

#include "daemon/request_json.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <deque>
#include <map>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

namespace canopy::daemon {

namespace asio = boost::asio;
using stream = asio::local::stream_protocol;

nlohmann::json error_reply(std::string_view code, const std::string& message) {
    return {{"ok", false}, {"error", {{"code", code}, {"message", message}}}};
}

class ControlServer::Session : public std::enable_shared_from_this<Session> {
public:
    Session(ControlServer& server, stream::socket socket) : server_(server), socket_(std::move(socket)) {}

    void start() {
        ucred cred{};
        socklen_t len = sizeof cred;
        if (::getsockopt(socket_.native_handle(), SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
            close();
            return;
        }
        peer_ = {cred.pid, cred.uid, cred.gid};
        if (!server_.allowed(peer_)) {
            closing_ = true;
            enqueue_now(error_reply("UNAUTHORIZED", "uid " + std::to_string(peer_.uid) + " (gid " +
                                                        std::to_string(peer_.gid) +
                                                        ") may not use this daemon; see control.allow_uids"));
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
        boost::system::error_code ignored;
        socket_.shutdown(stream::socket::shutdown_both, ignored);
        socket_.close(ignored);
        server_.sessions_.erase(shared_from_this());
    }

private:
    // Reads what the socket holds into in_ (one read can carry several frames, or part of one). At most
    // one read is outstanding, and none while MAX_PENDING replies are owed or the session is closing.
    void read_more() {
        if (reading_ || closing_ || eof_ || pending_ >= MAX_PENDING) {
            return;
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
        filled_ += n;
        resume();
    }

    // Handles every whole frame buffered, as far as MAX_PENDING allows, then reads on. A reply written from
    // inside a handler calls back here; the outer call carries on instead.
    void resume() {
        if (resuming_) {
            return;
        }
        resuming_ = true;
        while (!closing_ && pending_ < MAX_PENDING && take_frame()) {
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
            enqueue_now(error_reply("BAD_REQUEST", "frame length " + std::to_string(len) + " is outside 2.." +
                                                       std::to_string(server_.options_.max_frame_bytes) +
                                                       "; closing the connection"));
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
            complete(seq, serialize(error_reply("BAD_REQUEST", parsed.error), {}));
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
                    self->complete(seq, serialize(std::move(reply), id));
                }
            });
        });
        return true;
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
        return object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    }

    // Stores a reply and writes every reply that is next in request order.
    void complete(std::uint64_t seq, std::string reply) {
        done_.emplace(seq, std::move(reply));
        while (!done_.empty() && done_.begin()->first == next_reply_) {
            enqueue_now(std::move(done_.begin()->second));
            done_.erase(done_.begin());
            ++next_reply_;
            --pending_;
        }
        resume();
    }

    void enqueue_now(const nlohmann::json& reply) {
        enqueue_now(reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
    }

    void enqueue_now(const std::string& body) {
        std::string frame(4, '\0');
        const auto len = static_cast<std::uint32_t>(body.size());
        for (int i = 0; i < 4; ++i) {
            frame[static_cast<std::size_t>(i)] = static_cast<char>((len >> (8 * i)) & 0xff);
        }
        frame += body;
        out_.push_back(std::move(frame));
        if (!writing_) {
            write_next();
        }
    }

    void write_next() {
        if (out_.empty()) {
            writing_ = false;
            if (closing_ || (eof_ && pending_ == 0)) {
                close();
            }
            return;
        }
        writing_ = true;
        asio::async_write(socket_, asio::buffer(out_.front()),
                          [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) {
                              if (ec) {
                                  self->close();
                                  return;
                              }
                              self->out_.pop_front();
                              self->write_next();
                          });
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
    std::deque<std::string> out_;
    std::map<std::uint64_t, std::string> done_; // serialized replies waiting for an earlier one
    std::uint64_t next_request_ = 0;
    std::uint64_t next_reply_ = 0;
    std::size_t pending_ = 0;
    bool reading_ = false;
    bool writing_ = false;
    bool closing_ = false;
    bool eof_ = false;
};

ControlServer::ControlServer(asio::io_context& io, ControlOptions options, RequestHandler handler)
    : io_(io), options_(std::move(options)), handler_(std::move(handler)), acceptor_(io) {}

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
    acceptor_.async_accept([this](const boost::system::error_code& ec, stream::socket socket) {
        if (ec == asio::error::operation_aborted || stopped_) {
            return;
        }
        if (!ec) {
            auto session = std::make_shared<Session>(*this, std::move(socket));
            sessions_.insert(session);
            session->start();
        }
        do_accept();
    });
}

void ControlServer::stop_accepting() {
    if (stopped_) {
        return;
    }
    stopped_ = true;
    boost::system::error_code ignored;
    acceptor_.close(ignored);
    ::unlink(options_.socket.c_str());
}

void ControlServer::stop() {
    stop_accepting();
    auto sessions = sessions_;
    for (const auto& s : sessions) {
        s->close_when_idle();
    }
}

bool ControlServer::allowed(const Peer& peer) const {
    if (peer.uid == ::geteuid()) {
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
