#include "daemon/control_server.h"

#include <algorithm>
#include <array>
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
        read_header();
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
    void read_header() {
        if (closing_ || pending_ >= MAX_PENDING) {
            reading_ = false;
            return;
        }
        reading_ = true;
        asio::async_read(
            socket_, asio::buffer(header_),
            [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) { self->on_header(ec); });
    }

    void on_header(const boost::system::error_code& ec) {
        if (ec) {
            finish_reading();
            return;
        }
        const std::uint32_t len = std::uint32_t{header_[0]} | std::uint32_t{header_[1]} << 8 |
                                  std::uint32_t{header_[2]} << 16 | std::uint32_t{header_[3]} << 24;
        if (len < 2 || len > server_.options_.max_frame_bytes) {
            closing_ = true;
            enqueue_now(error_reply("BAD_REQUEST", "frame length " + std::to_string(len) + " is outside 2.." +
                                                       std::to_string(server_.options_.max_frame_bytes) +
                                                       "; closing the connection"));
            return;
        }
        body_.resize(len);
        asio::async_read(
            socket_, asio::buffer(body_),
            [self = shared_from_this()](const boost::system::error_code& e, std::size_t) { self->on_body(e); });
    }

    void on_body(const boost::system::error_code& ec) {
        if (ec) {
            finish_reading(); // a truncated frame: the client went away mid-request
            return;
        }
        const std::uint64_t seq = next_request_++;
        ++pending_;
        nlohmann::json request = nlohmann::json::parse(body_, nullptr, false);
        if (request.is_discarded() || !request.is_object()) {
            complete(seq, serialize(error_reply("BAD_REQUEST", "the frame body is not a JSON object"), {}));
        } else {
            // The request's "id", if any, as the JSON text the reply repeats.
            std::string id = request.contains("id") ? request["id"].dump() : std::string();
            auto weak = weak_from_this();
            auto& io = server_.io_;
            server_.handler_(request, peer_, [weak, seq, id = std::move(id), &io](Response reply) {
                // Inline when the reply comes from the io thread itself (results are recorded there).
                asio::dispatch(io, [weak, seq, id, reply = std::move(reply)]() mutable {
                    if (auto self = weak.lock()) {
                        self->complete(seq, serialize(std::move(reply), id));
                    }
                });
            });
        }
        read_header();
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
        if (!reading_ && !closing_ && !eof_) {
            read_header();
        }
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
    std::array<std::uint8_t, 4> header_{};
    std::vector<char> body_;
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
