#pragma once
// SessionStreams: a remote link's session on a node (daemon/remote_link.cpp): its two long-lived streams, Attach (the
// node's events: hello, status, heartbeats) and Tasks (calls out, replies back), on gRPC's asynchronous API with one
// completion queue and one thread that waits on it.
//
// That thread is the only one of the link that waits in gRPC's poller while tasks flow. gRPC's callback API
// runs reactors on two threads of its own that take turns at polling the channel's socket, so that each message
// read also wakes the other to take over the polling; a blocking Read on a thread of the link's own joins the
// same rotation. A remote no-op task woke the link's threads about 7 times with those, and about 3.5 times
// with this (docs/performance.md, "Wake-ups per task"). On a machine with CPUs to spare the thread polls the queue
// for QUEUE_POLL after each event before it blocks (next_event), so that a task's reply finds it awake.
//
// send() queues a call: one message is written at a time and holds every call queued behind the write before it
// (MAX_BATCH_CALLS, MAX_BATCH_BYTES). Each event read goes to `on_event`, each reply to `on_reply`, and the end of
// either stream, whatever ended it, to `on_end` once, all on the streams' thread. The Tasks stream opens with
// open_tasks(), once the hello has come.
//
// Thread safety: send() and open_tasks() from any thread; the callbacks run on the streams' own thread, one at a
// time.

#include "remote/canopy_remote.grpc.pb.h"

#include <cstdint>
#include <deque>
#include <functional>
#include <grpcpp/grpcpp.h>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace canopy::daemon {

class SessionStreams {
public:
    using Stub = remote::v1::Node::Stub;

    SessionStreams(Stub& stub, const remote::v1::AttachRequest& request,
                   std::function<void(const remote::v1::NodeEvent&)> on_event,
                   std::function<void(const remote::v1::TaskReply&)> on_reply,
                   std::function<void(const std::string& which, const grpc::Status&)> on_end);
    SessionStreams(const SessionStreams&) = delete;
    SessionStreams& operator=(const SessionStreams&) = delete;
    // Cancels both streams, waits for their ends (their on_end calls included) and for the thread.
    ~SessionStreams();

    // Opens the Tasks stream (once, after the hello).
    void open_tasks();
    // Queues a call; it goes out in the next message written.
    void send(remote::v1::TaskCall call);

private:
    enum class Op : std::uintptr_t {
        EVENTS_STARTED = 1,
        EVENT_READ,
        EVENTS_FINISHED,
        TASKS_STARTED,
        REPLIES_READ,
        CALLS_WRITTEN,
        TASKS_FINISHED
    };
    static void* tag(Op op) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(op)); }

    // Runs until both streams have finished, then drains and shuts the queue down.
    void run();
    // One completion; false once nothing is left open.
    bool handle(Op op, bool ok);
    // The Tasks stream's read failed: it has ended, and nothing more is written to it. Finish reports why.
    void finish_tasks();
    // One stream has finished; false when none is left open.
    bool closed();
    // Moves the oldest queued calls into the next message and writes it. REQUIRES mu_.
    void write_next_locked();

    Stub& stub_;
    std::function<void(const remote::v1::NodeEvent&)> on_event_;
    std::function<void(const remote::v1::TaskReply&)> on_reply_;
    std::function<void(const std::string&, const grpc::Status&)> on_end_;
    grpc::CompletionQueue cq_;
    grpc::ClientContext events_context_;
    std::unique_ptr<grpc::ClientAsyncReader<remote::v1::NodeEvent>> events_;
    remote::v1::NodeEvent event_;
    grpc::Status events_status_;
    grpc::ClientContext tasks_context_;
    std::unique_ptr<grpc::ClientAsyncReaderWriter<remote::v1::TaskCalls, remote::v1::TaskReplies>>
        tasks_; // set under mu_
    remote::v1::TaskReplies replies_;
    grpc::Status tasks_status_;
    std::mutex mu_;
    int open_ = 1;                            // streams not yet finished
    bool tasks_ready_ = false;                // the Tasks stream has started: writes may go
    bool writing_ = false;                    // a write is in progress
    bool tasks_ended_ = false;                // the Tasks stream's read failed: no more writes
    std::deque<remote::v1::TaskCall> queued_; // not yet in a message
    remote::v1::TaskCalls calls_;             // being written while writing_
    std::thread thread_;
};

} // namespace canopy::daemon
