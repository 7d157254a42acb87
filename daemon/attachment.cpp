#include "daemon/attachment.h"

#include <boost/asio/post.hpp>

namespace canopy::daemon {

InboundAttachment::~InboundAttachment() {
    discard();
}

void InboundAttachment::read_into(std::span<std::byte> into, AttachmentSink::Done done) {
    if (!claim()) {
        boost::asio::post(io_, [done = std::move(done)] { done("the attachment was claimed twice"); });
        return;
    }
    boost::asio::post(io_, [sink = sink_, into, size = size_, done = std::move(done)]() mutable {
        if (size == 0) {
            done("");
        } else if (auto s = sink.lock()) {
            s->attachment_into(into, std::move(done));
        } else {
            done("the connection closed before its attachment was read");
        }
    });
}

void InboundAttachment::discard() {
    if (!claim() || size_ == 0) {
        return;
    }
    boost::asio::post(io_, [sink = sink_] {
        if (auto s = sink.lock()) {
            s->attachment_discard();
        }
    });
}

} // namespace canopy::daemon
