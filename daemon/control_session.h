#pragma once
// ControlServer::Session: one connection of the control socket (the behaviour and bounds are stated in
// control_server.h). Private to control_server.cpp and control_session*.cpp.
//
// A session reads frames into in_, hands each request to the server's handler, and writes the replies in request
// order, each with the fds and the attachment it carries. After a request with an inbound attachment it reads
// nothing else until the attachment is read (into the handler's span) or discarded.
//
// Ownership: kept alive by the server's set and by its own pending operations (shared_from_this).
// Thread safety: every method runs on the io thread.

#include "daemon/control_server.h"

#include <deque>
#include <map>
#include <optional>

namespace canopy::daemon {

// The fds a reply carries, shared by the reply and the frame that sends them.
using ReplyFds = std::shared_ptr<const std::vector<ipc::UniqueFd>>;

// A frame: the 4-byte little-endian length, then `body`.
std::string frame_of(const std::string& body);
// A reply's JSON text; invalid UTF-8 is replaced.
std::string dump_reply(const nlohmann::json& reply);

class ControlServer::Session : public std::enable_shared_from_this<Session>, public AttachmentSink {
public:
    using stream = boost::asio::local::stream_protocol;
    using Clock = std::chrono::steady_clock;

    Session(ControlServer& server, stream::socket socket, Peer peer)
        : server_(server), socket_(std::move(socket)), peer_(peer), idle_since_(Clock::now()) {}

    void start();
    // Closes once every reply already queued has been written; an idle session closes at once.
    void close_when_idle();
    void close();
    // Closes the session when it waits for the client past a timeout of ControlLimits (see the header).
    void check_deadlines(Clock::time_point now);

    // AttachmentSink (control_session_attachment.cpp).
    void attachment_into(std::span<std::byte> into, AttachmentSink::Done done) override;
    void attachment_discard() override;

private:
    static constexpr std::size_t READ_CHUNK = 64 * 1024;

    // What the session does with the bytes of an inbound attachment.
    enum class Inbound {
        NONE,       // no attachment pending: frames are read
        WAITING,    // its handler has not said yet; nothing is read
        INTO,       // read into the handler's span
        DISCARDING, // read and dropped
    };

    // A frame to write: its bytes, the fds its first byte carries (none once that byte is sent) and the bytes
    // written after it.
    struct Out {
        std::string bytes;
        ReplyFds fd;
        std::shared_ptr<OutboundAttachment> attachment;
    };
    // A serialized reply waiting for an earlier one.
    struct Held {
        std::string body;
        ReplyFds fd;
        std::shared_ptr<OutboundAttachment> attachment;
    };

    bool paused() const noexcept;
    void read_more();
    void on_read(const boost::system::error_code& ec, std::size_t n);
    void resume();
    static std::uint32_t frame_length(const char* p);
    bool take_frame();
    // Sets `size` to the bytes that follow the frame of `request` ("attachment": N) for its handler. True when the
    // request is answered here: an attachment on an op without one (discarded), or a count that cannot be trusted
    // or is over the limit (the connection closes).
    bool check_attachment(const nlohmann::json& request, std::uint64_t seq, const std::string& id,
                          std::optional<std::uint64_t>& size);
    void fail_incomplete_frame(std::size_t buffered);
    static std::string serialize(Response reply, const std::string& id);
    static std::string serialize_progress(Response& reply, const std::string& id);
    void interim(std::uint64_t seq, const std::string& body);
    void complete(std::uint64_t seq, std::string reply, ReplyFds fd = nullptr,
                  std::shared_ptr<OutboundAttachment> attachment = nullptr);
    void enqueue_now(const std::string& body, ReplyFds fd = nullptr,
                     std::shared_ptr<OutboundAttachment> attachment = nullptr);
    void write_next();
    void on_written(const boost::system::error_code& ec);
    void write_with_fd();
    void finish_reading();

    // Inbound attachments (control_session_attachment.cpp).
    void expect_attachment(std::uint64_t size);
    void take_buffered_attachment();
    void continue_attachment();
    void read_attachment();
    void on_attachment_read(const boost::system::error_code& ec, std::size_t n);
    void finish_attachment(const std::string& error);
    void fail_incomplete_attachment();
    // Tells every attachment still owed that it will not be written (the connection closes).
    void abandon_outbound();

    ControlServer& server_;
    stream::socket socket_;
    Peer peer_;
    std::vector<char> in_; // bytes read from the socket: [consumed_, filled_) are not handled yet
    std::size_t filled_ = 0;
    std::size_t consumed_ = 0;
    bool resuming_ = false;
    std::deque<Out> out_;                // frames to write, the front one being written
    std::size_t out_bytes_ = 0;          // bytes of out_, attachments included
    std::map<std::uint64_t, Held> done_; // replies waiting for an earlier one
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

    Inbound inbound_ = Inbound::NONE;
    std::uint64_t inbound_size_ = 0;
    std::uint64_t inbound_got_ = 0;
    std::byte* inbound_into_ = nullptr; // INTO: where the attachment's byte 0 goes
    AttachmentSink::Done inbound_done_;
    Clock::time_point inbound_since_; // when the attachment last made progress
    std::string inbound_error_;       // why the attachment fails once the read in flight returns
};

} // namespace canopy::daemon
