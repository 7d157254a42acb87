#include "daemon/control_session.h"

#include "daemon/request_json.h"
#include "ipc/fd_passing.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>

namespace canopy::daemon {

namespace asio = boost::asio;
using stream = asio::local::stream_protocol;

std::string frame_of(const std::string& body) {
    std::string frame(4, '\0');
    const auto len = static_cast<std::uint32_t>(body.size());
    for (int i = 0; i < 4; ++i) {
        frame[static_cast<std::size_t>(i)] = static_cast<char>((len >> (8 * i)) & 0xff);
    }
    frame += body;
    return frame;
}

std::string dump_reply(const nlohmann::json& reply) {
    return reply.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

void ControlServer::Session::start() {
    if (!server_.allowed(peer_)) {
        server_.log_->warn("control: refused pid {} uid {} gid {}: not in control.allow_uids or allow_gids", peer_.pid,
                           peer_.uid, peer_.gid);
        closing_ = true;
        enqueue_now(dump_reply(error_reply("UNAUTHORIZED", "uid " + std::to_string(peer_.uid) + " (gid " +
                                                               std::to_string(peer_.gid) +
                                                               ") may not use this daemon; see control.allow_uids")));
        return;
    }
    resume();
}

void ControlServer::Session::close_when_idle() {
    closing_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(stream::socket::shutdown_receive, ignored);
    if (!writing_) {
        close();
    }
}

void ControlServer::Session::close() {
    if (closed_) {
        return;
    }
    closed_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(stream::socket::shutdown_both, ignored);
    socket_.close(ignored); // a read in flight returns operation_aborted, which ends its attachment
    if (inbound_ == Inbound::INTO && !reading_) {
        finish_attachment("the connection closed before its attachment arrived");
    }
    abandon_outbound();
    server_.forget(shared_from_this());
}

void ControlServer::Session::check_deadlines(Clock::time_point now) {
    if (!reading_ || closing_ || closed_) {
        return; // not waiting for the client: it owes nothing while the session does not read
    }
    const ControlLimits& limits = server_.options_.limits;
    if (inbound_ != Inbound::NONE) {
        if (now - inbound_since_ >= limits.frame_timeout) {
            fail_incomplete_attachment();
        }
        return;
    }
    const std::size_t buffered = filled_ - consumed_;
    if (buffered > 0 && now - frame_since_ >= limits.frame_timeout) {
        fail_incomplete_frame(buffered);
    } else if (buffered == 0 && pending_ == 0 && !writing_ && now - idle_since_ >= limits.idle_timeout) {
        server_.log_->debug("control: closing the connection of pid {} uid {}: no request for {} ms", peer_.pid,
                            peer_.uid, limits.idle_timeout.count());
        close();
    }
}

// Reads no further request while this many reply bytes wait to be written or for an earlier reply.
bool ControlServer::Session::paused() const noexcept {
    return pending_ >= MAX_PENDING || out_bytes_ + done_bytes_ >= server_.options_.limits.max_queued_reply_bytes;
}

// Reads what the socket holds into in_ (one read can carry several frames, or part of one). At most one read is
// outstanding, and none while paused() or the session is closing. While an inbound attachment is pending, reads go
// to it instead, once its handler has said where.
void ControlServer::Session::read_more() {
    if (inbound_ == Inbound::INTO || inbound_ == Inbound::DISCARDING) {
        read_attachment();
        return;
    }
    if (reading_ || closing_ || closed_ || eof_ || inbound_ == Inbound::WAITING) {
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
    // Keep the unread bytes at the front and room for at least READ_CHUNK more, or for the whole frame that is
    // partly buffered.
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

void ControlServer::Session::on_read(const boost::system::error_code& ec, std::size_t n) {
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

// Handles every whole frame buffered, as far as paused() allows, then reads on. A reply written from inside a
// handler calls back here; the outer call carries on instead.
void ControlServer::Session::resume() {
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

std::uint32_t ControlServer::Session::frame_length(const char* p) {
    const auto* u = reinterpret_cast<const unsigned char*>(p);
    return std::uint32_t{u[0]} | std::uint32_t{u[1]} << 8 | std::uint32_t{u[2]} << 16 | std::uint32_t{u[3]} << 24;
}

// Handles the frame at the front of the buffered bytes; false when no whole frame is buffered, or when the bytes
// after the last one are an attachment.
bool ControlServer::Session::take_frame() {
    if (inbound_ != Inbound::NONE) {
        return false;
    }
    const std::size_t buffered = filled_ - consumed_;
    if (buffered < 4) {
        return false;
    }
    const std::uint32_t len = frame_length(in_.data() + consumed_);
    if (len < 2 || len > server_.options_.max_frame_bytes) {
        closing_ = true;
        enqueue_now(dump_reply(error_reply("BAD_REQUEST", "frame length " + std::to_string(len) + " is outside 2.." +
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
        complete(seq, dump_reply(error_reply("BAD_REQUEST", parsed.error)));
        return true;
    }
    // The request's "id", if any, as the JSON text the reply repeats.
    std::string id = request.contains("id") ? request["id"].dump() : std::string();
    std::optional<std::uint64_t> attachment_size;
    if (check_attachment(request, seq, id, attachment_size)) {
        return true;
    }
    Attachment attachment;
    if (attachment_size) {
        attachment = std::make_shared<InboundAttachment>(*attachment_size, weak_from_this(), socket_.get_executor());
        expect_attachment(*attachment_size);
    }
    auto weak = weak_from_this();
    auto& io = server_.io_;
    server_.handler_(
        request, parsed.run.get(), peer_,
        [weak, seq, id = std::move(id), &io](Response reply) {
            // Always posted, never run inline: a reply is often given under the handler's own lock, and completing
            // it can admit the next buffered request, which would take that lock again.
            asio::post(io, [weak, seq, id, reply = std::move(reply)]() mutable {
                if (auto self = weak.lock()) {
                    if (reply.interim()) {
                        self->interim(seq, serialize_progress(reply, id));
                    } else {
                        auto fd = reply.fds();
                        auto bytes = reply.bytes();
                        self->complete(seq, serialize(std::move(reply), id), std::move(fd), std::move(bytes));
                    }
                }
            });
        },
        std::move(attachment));
    return true;
}

// The part of a frame buffered did not become whole within frame_timeout: the stream cannot be trusted.
void ControlServer::Session::fail_incomplete_frame(std::size_t buffered) {
    const ControlLimits& limits = server_.options_.limits;
    const std::string got = buffered < 4 ? std::to_string(buffered) + " of its 4 length bytes"
                                         : std::to_string(buffered) + " of its " +
                                               std::to_string(4 + std::uint64_t{frame_length(in_.data() + consumed_)}) +
                                               " bytes";
    server_.log_->info("control: closing the connection of pid {} uid {}: a frame incomplete after {} ms", peer_.pid,
                       peer_.uid, limits.frame_timeout.count());
    closing_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(stream::socket::shutdown_receive, ignored); // ends the outstanding read
    enqueue_now(
        dump_reply(error_reply("BAD_REQUEST", "frame incomplete after " + std::to_string(limits.frame_timeout.count()) +
                                                  " ms: " + got + " arrived; closing the connection")));
}

// The body of a reply frame: "ok" (true unless the handler said otherwise) and the request's "id" added.
std::string ControlServer::Session::serialize(Response reply, const std::string& id) {
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
    return dump_reply(object);
}

// {"progress": ..., "id": ...}: no "ok", so that a client tells it from the final reply.
std::string ControlServer::Session::serialize_progress(Response& reply, const std::string& id) {
    std::string body = "{\"progress\":" + dump_reply(reply.json());
    if (!id.empty()) {
        body += ",\"id\":" + id;
    }
    body += '}';
    return body;
}

// Writes a progress frame of request `seq` when it is the oldest unanswered one and the reply budget has room;
// drops it otherwise (a later one, or the final reply, says more).
void ControlServer::Session::interim(std::uint64_t seq, const std::string& body) {
    if (seq == next_reply_ && !closing_ &&
        out_bytes_ + done_bytes_ + body.size() < server_.options_.limits.max_queued_reply_bytes) {
        enqueue_now(body);
    }
}

// Stores a reply (with the fds and the attachment it carries, if any) and writes every reply that is next in
// request order.
void ControlServer::Session::complete(std::uint64_t seq, std::string reply, ReplyFds fd,
                                      std::shared_ptr<OutboundAttachment> attachment) {
    if (closed_) {
        if (attachment) {
            attachment->finish(false);
        }
        return;
    }
    done_bytes_ += reply.size();
    done_.emplace(seq, Held{std::move(reply), std::move(fd), std::move(attachment)});
    while (!done_.empty() && done_.begin()->first == next_reply_) {
        Held& next = done_.begin()->second;
        done_bytes_ -= next.body.size();
        enqueue_now(next.body, std::move(next.fd), std::move(next.attachment));
        done_.erase(done_.begin());
        ++next_reply_;
        --pending_;
    }
    resume();
}

void ControlServer::Session::enqueue_now(const std::string& body, ReplyFds fd,
                                         std::shared_ptr<OutboundAttachment> attachment) {
    const std::size_t extra = attachment ? attachment->bytes().size() : 0;
    out_.push_back({frame_of(body), std::move(fd), std::move(attachment)});
    out_bytes_ += out_.back().bytes.size() + extra;
    if (!writing_) {
        write_next();
    }
}

void ControlServer::Session::write_next() {
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
    Out& front = out_.front();
    if (front.fd && !front.fd->empty()) {
        write_with_fd();
        return;
    }
    auto done = [self = shared_from_this()](const boost::system::error_code& ec, std::size_t) { self->on_written(ec); };
    if (front.attachment) {
        const auto bytes = front.attachment->bytes();
        asio::async_write(
            socket_,
            std::array<asio::const_buffer, 2>{asio::buffer(front.bytes), asio::buffer(bytes.data(), bytes.size())},
            std::move(done));
        return;
    }
    asio::async_write(socket_, asio::buffer(front.bytes), std::move(done));
}

void ControlServer::Session::on_written(const boost::system::error_code& ec) {
    if (ec) {
        close();
        return;
    }
    Out& front = out_.front();
    out_bytes_ -= front.bytes.size();
    if (front.attachment) {
        out_bytes_ -= front.attachment->bytes().size();
        front.attachment->finish(true);
    }
    out_.pop_front();
    write_next();
    resume(); // the reply budget may admit the next request
}

// The frame at the front carries an fd: one sendmsg puts it on the frame's first byte (waiting until the socket
// takes a byte); the rest of the frame, and its attachment, go the usual way.
void ControlServer::Session::write_with_fd() {
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
    if (front.bytes.empty() && !front.attachment) {
        out_.pop_front();
    }
    write_next();
    resume();
}

void ControlServer::Session::finish_reading() {
    eof_ = true;
    reading_ = false;
    if (pending_ == 0 && !writing_) {
        close();
    }
}

} // namespace canopy::daemon
