#pragma once
// The wait of a thread that serves a gRPC completion queue alone: the streams of a remote node's session, the
// link's and the L4's own (daemon/remote_session_streams.cpp), and the node's server (daemon/remote_server_impl.h).
//
// Thread safety: as grpc::CompletionQueue::Next; one thread per queue.

#include <chrono>
#include <grpcpp/completion_queue.h>

namespace canopy::daemon {

// How long next_event() polls for the next event after one, where it polls at all. A remote no-op's reply reaches
// the L4, and the next task reaches the node, within one round trip of the event before: 70-130 µs between two
// hosts of a 16-CPU machine (docs/performance.md, "Polling the completion queues").
inline constexpr std::chrono::microseconds QUEUE_POLL{200};

// The next event of `queue`, as grpc::CompletionQueue::Next returns it: false once the queue is shut down and
// drained. Where ipc::spare_cpus() says so, it first polls the queue without blocking for up to QUEUE_POLL, so that
// an event that comes soon is taken on a CPU that is awake: a thread blocked in gRPC's poller wakes only when the
// kernel schedules it, which between two hosts costs a remote task as much as the rest of the hop.
bool next_event(grpc::CompletionQueue& queue, void** tag, bool* ok);

} // namespace canopy::daemon
