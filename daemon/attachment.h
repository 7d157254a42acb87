#pragma once
// Attachments: raw bytes that travel on the control socket right after a frame (docs/control-protocol.md,
// "Attachments"), so that buffer.write and buffer.read move bytes without base64 and without a size cap below the
// buffer's.
//
// InboundAttachment: the bytes that follow a request frame ("attachment": N). The session stops reading the
// connection after that frame until the request's handler says where the bytes go: read_into() a span it holds
// alive until `done` runs, or discard(). Dropping the last reference without either discards them. The session
// reads nothing else meanwhile, so the next frame is found after the N bytes.
//
// OutboundAttachment: bytes written right after a reply frame. The bytes stay valid while the object lives (it
// holds `keep`, e.g. the mapping they lie in); `sent` runs once, on the io thread, when they were written whole
// (true) or the connection closed first (false), or from the destructor (false) when neither happened.
//
// Thread safety: read_into, discard and the destructor of an InboundAttachment may run on any thread (they post to
// the io thread); `done` runs on the io thread. OutboundAttachment::finish runs on the io thread (the session's) or
// from the destructor on whichever thread drops the last reference.

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
// clang-format off
#include <utility> // Boost 1.74's Asio needs it first under C++20
#include <boost/asio/any_io_executor.hpp>
// clang-format on

namespace canopy::daemon {

// What a control session does with the bytes of an inbound attachment once its handler has decided. Called on
// the io thread only.
class AttachmentSink {
public:
    // "" once every byte arrived, else why not (the connection closed or timed out; it closes).
    using Done = std::function<void(const std::string& error)>;

    virtual ~AttachmentSink() = default;
    // REQUIRES: into.size() is the attachment's size.
    virtual void attachment_into(std::span<std::byte> into, Done done) = 0;
    virtual void attachment_discard() = 0;
};

class InboundAttachment {
public:
    InboundAttachment(std::uint64_t size, std::weak_ptr<AttachmentSink> sink, boost::asio::any_io_executor io)
        : size_(size), sink_(std::move(sink)), io_(std::move(io)) {}
    ~InboundAttachment();
    InboundAttachment(const InboundAttachment&) = delete;
    InboundAttachment& operator=(const InboundAttachment&) = delete;

    std::uint64_t size() const noexcept { return size_; }
    // Reads the bytes into `into` (size() bytes, valid until `done` runs); `done` runs exactly once, on the io
    // thread. At most one call of read_into or discard.
    void read_into(std::span<std::byte> into, AttachmentSink::Done done);
    // Reads the bytes and drops them.
    void discard();

private:
    bool claim() noexcept { return !claimed_.exchange(true); }

    std::uint64_t size_;
    std::weak_ptr<AttachmentSink> sink_;
    boost::asio::any_io_executor io_;
    std::atomic<bool> claimed_{false};
};

// The inbound attachment of a request; null when the request has none.
using Attachment = std::shared_ptr<InboundAttachment>;

class OutboundAttachment {
public:
    using Sent = std::function<void(bool written)>;

    OutboundAttachment(std::span<const std::byte> bytes, std::shared_ptr<void> keep, Sent sent)
        : bytes_(bytes), keep_(std::move(keep)), sent_(std::move(sent)) {}
    ~OutboundAttachment() { finish(false); }
    OutboundAttachment(const OutboundAttachment&) = delete;
    OutboundAttachment& operator=(const OutboundAttachment&) = delete;

    std::span<const std::byte> bytes() const noexcept { return bytes_; }
    // Runs `sent` the first time only.
    void finish(bool written) {
        if (!finished_.exchange(true) && sent_) {
            sent_(written);
        }
    }

private:
    std::span<const std::byte> bytes_;
    std::shared_ptr<void> keep_;
    Sent sent_;
    std::atomic<bool> finished_{false};
};

} // namespace canopy::daemon
