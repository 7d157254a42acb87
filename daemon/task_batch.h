#pragma once
// The batches of a session's Tasks stream (remote/canopy_remote.proto): either side writes one message at a time,
// holding the calls (TaskCalls) or replies (TaskReplies) that queued behind the write before it, so that a graph's
// tasks share gRPC's cost per message while a lone task goes out at once.
//
// Thread safety: take_batch works on what its caller holds.

#include <cstddef>
#include <deque>
#include <google/protobuf/repeated_ptr_field.h>

namespace canopy::daemon {

// The most calls in one TaskCalls message, and replies in one TaskReplies, that either side writes, and the bytes
// past which it starts the next message (a message holds at least one). A node takes a TaskCalls of more, within
// the message size it accepts.
inline constexpr std::size_t MAX_BATCH_CALLS = 1024;
inline constexpr std::size_t MAX_BATCH_BYTES = 1 << 20;

// Moves the oldest messages of `queued` into the empty `batch`, in order: at most MAX_BATCH_CALLS, and none after
// the one that brings their encoded size to MAX_BATCH_BYTES or more.
template <class Message>
void take_batch(std::deque<Message>& queued, google::protobuf::RepeatedPtrField<Message>& batch) {
    std::size_t bytes = 0;
    while (!queued.empty() && static_cast<std::size_t>(batch.size()) < MAX_BATCH_CALLS && bytes < MAX_BATCH_BYTES) {
        bytes += queued.front().ByteSizeLong();
        *batch.Add() = std::move(queued.front());
        queued.pop_front();
    }
}

} // namespace canopy::daemon
