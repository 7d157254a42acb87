// The inbound attachments of a control session (docs/control-protocol.md, "Attachments"): the count a request
// announces, the bytes read into the handler's span or dropped, and the bound on a client that stops sending
// them (no byte for frame_timeout: the connection closes).
#include "daemon/control_session.h"

#include <algorithm>
#include <cstring>

namespace canopy::daemon {

namespace {

// One read of an attachment asks for at most this much (Linux moves at most about 2 GiB per read anyway).
constexpr std::uint64_t MAX_ATTACHMENT_READ = std::uint64_t{1} << 30;

} // namespace

bool ControlServer::Session::check_attachment(const nlohmann::json& request, std::uint64_t seq, const std::string& id,
                                              std::optional<std::uint64_t>& size) {
    const auto it = request.find("attachment");
    if (it == request.end()) {
        return false;
    }
    const auto op_it = request.find("op");
    const std::string op = op_it != request.end() && op_it->is_string() ? op_it->get<std::string>() : "";
    const auto& ops = server_.options_.attachment_ops;
    const bool takes = std::find(ops.begin(), ops.end(), op) != ops.end();
    // A count the stream cannot be resynchronized after closes the connection: the bytes that follow are unknown.
    const auto refuse_and_close = [&](const std::string& message) {
        server_.log_->info("control: closing the connection of pid {} uid {}: {}", peer_.pid, peer_.uid, message);
        closing_ = true;
        boost::system::error_code ignored;
        socket_.shutdown(stream::socket::shutdown_receive, ignored);
        complete(seq, serialize(Response(error_reply("BAD_REQUEST", message)), id));
        return true;
    };
    if (!it->is_number_unsigned()) {
        if (!takes) {
            return false; // not a byte count (buffer.read's "attachment": true): the handler reads it
        }
        return refuse_and_close("attachment: expected a byte count (an integer from 0), got " + it->dump() +
                                "; closing the connection");
    }
    const std::uint64_t count = it->get<std::uint64_t>();
    const std::uint64_t most = server_.options_.limits.max_attachment_bytes;
    if (count > most) {
        return refuse_and_close("attachment of " + std::to_string(count) +
                                " bytes exceeds control.max_attachment_bytes (" + std::to_string(most) +
                                "); closing the connection");
    }
    if (!takes) {
        complete(seq,
                 serialize(Response(error_reply("BAD_REQUEST", "attachment: op \"" + op +
                                                                   "\" takes no attachment (only buffer.write "
                                                                   "does); its " +
                                                                   std::to_string(count) + " bytes are discarded")),
                           id));
        expect_attachment(count); // the connection stays usable: the bytes are read and dropped
        attachment_discard();
        return true;
    }
    size = count;
    return false;
}

void ControlServer::Session::expect_attachment(std::uint64_t size) {
    if (size == 0) {
        return; // nothing follows the frame
    }
    inbound_ = Inbound::WAITING;
    inbound_size_ = size;
    inbound_got_ = 0;
    inbound_error_.clear();
}

void ControlServer::Session::attachment_into(std::span<std::byte> into, AttachmentSink::Done done) {
    if (closed_ || closing_ || eof_) {
        done("the connection closed before its attachment was read");
        return;
    }
    if (inbound_ != Inbound::WAITING || into.size() != inbound_size_) {
        done("the attachment of " + std::to_string(inbound_size_) + " bytes does not fit a span of " +
             std::to_string(into.size()) + " bytes");
        return;
    }
    inbound_ = Inbound::INTO;
    inbound_into_ = into.data();
    inbound_done_ = std::move(done);
    take_buffered_attachment();
    continue_attachment();
}

void ControlServer::Session::attachment_discard() {
    if (inbound_ != Inbound::WAITING) {
        return;
    }
    inbound_ = Inbound::DISCARDING;
    take_buffered_attachment();
    continue_attachment();
}

// The bytes of the attachment that arrived with its frame (one read takes what the socket holds).
void ControlServer::Session::take_buffered_attachment() {
    const auto n = static_cast<std::size_t>(std::min<std::uint64_t>(filled_ - consumed_, inbound_size_ - inbound_got_));
    if (inbound_ == Inbound::INTO && n > 0) {
        std::memcpy(inbound_into_ + inbound_got_, in_.data() + consumed_, n);
    }
    consumed_ += n;
    inbound_got_ += n;
}

void ControlServer::Session::continue_attachment() {
    if (inbound_got_ == inbound_size_) {
        finish_attachment("");
        return;
    }
    inbound_since_ = Clock::now();
    read_more();
}

void ControlServer::Session::read_attachment() {
    if (reading_) {
        return;
    }
    if (closing_ || closed_ || eof_) {
        finish_attachment(inbound_error_.empty()
                              ? "the connection closed after " + std::to_string(inbound_got_) +
                                    " of the attachment's " + std::to_string(inbound_size_) + " bytes"
                              : inbound_error_);
        return;
    }
    const std::uint64_t want = std::min(inbound_size_ - inbound_got_, MAX_ATTACHMENT_READ);
    boost::asio::mutable_buffer target;
    if (inbound_ == Inbound::INTO) {
        target = boost::asio::buffer(inbound_into_ + inbound_got_, static_cast<std::size_t>(want));
    } else {
        // Every buffered byte was taken, so in_ is free to receive what is dropped.
        consumed_ = 0;
        filled_ = 0;
        if (in_.size() < READ_CHUNK) {
            in_.resize(READ_CHUNK);
        }
        target = boost::asio::buffer(in_.data(), static_cast<std::size_t>(std::min<std::uint64_t>(want, in_.size())));
    }
    reading_ = true;
    socket_.async_read_some(target, [self = shared_from_this()](const boost::system::error_code& ec, std::size_t n) {
        self->on_attachment_read(ec, n);
    });
}

void ControlServer::Session::on_attachment_read(const boost::system::error_code& ec, std::size_t n) {
    reading_ = false;
    if (!ec) {
        inbound_got_ += n;
        inbound_since_ = Clock::now();
    }
    if (ec || !inbound_error_.empty()) {
        finish_attachment(inbound_error_.empty()
                              ? "the connection closed after " + std::to_string(inbound_got_) +
                                    " of the attachment's " + std::to_string(inbound_size_) + " bytes"
                              : inbound_error_);
        finish_reading();
        return;
    }
    if (inbound_got_ == inbound_size_) {
        finish_attachment("");
        return;
    }
    read_more();
}

// Ends the attachment: `done` learns the outcome; after a whole one the frames that follow are read. A failed one
// leaves the connection closing (the stream cannot be trusted).
void ControlServer::Session::finish_attachment(const std::string& error) {
    AttachmentSink::Done done = std::move(inbound_done_);
    inbound_done_ = nullptr;
    inbound_ = Inbound::NONE;
    inbound_into_ = nullptr;
    if (!error.empty()) {
        closing_ = true;
    }
    if (done) {
        done(error);
    }
    if (error.empty()) {
        if (filled_ > consumed_) {
            frame_since_ = Clock::now(); // the bytes left start the next frame
        }
        resume();
    }
}

// No byte of the attachment arrived for frame_timeout: a BAD_REQUEST frame, then the connection closes. The read
// in flight returns (the receive side is shut down) and ends the attachment with the same words.
void ControlServer::Session::fail_incomplete_attachment() {
    const ControlLimits& limits = server_.options_.limits;
    inbound_error_ = "attachment incomplete: no byte of it arrived for " +
                     std::to_string(limits.frame_timeout.count()) + " ms, after " + std::to_string(inbound_got_) +
                     " of its " + std::to_string(inbound_size_) + " bytes; closing the connection";
    server_.log_->info("control: closing the connection of pid {} uid {}: {}", peer_.pid, peer_.uid, inbound_error_);
    closing_ = true;
    boost::system::error_code ignored;
    socket_.shutdown(stream::socket::shutdown_receive, ignored);
    enqueue_now(dump_reply(error_reply("BAD_REQUEST", inbound_error_)));
}

void ControlServer::Session::abandon_outbound() {
    for (Out& out : out_) {
        if (out.attachment) {
            out.attachment->finish(false);
        }
    }
    for (auto& [seq, done] : done_) {
        if (done.attachment) {
            done.attachment->finish(false);
        }
    }
}

} // namespace canopy::daemon
