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
// open_tasks(), once the hello has come. Replies are read while a call is unanswered: once every call has its
// reply, the next Read starts with the next call, after its write (see REPLIES_READ in handle()).
//
// A read fails when the node ended the stream, and also when a message came that protobuf could not parse (a
// string that is not UTF-8, say). gRPC does not end the call then, and Finish would wait for a status the node
// never sends: a read that failed and whose Finish has not come within READ_END_GRACE cancels the stream, and
// `on_end` gets DATA_LOSS naming the message that could not be read.
//
// Thread safety: send() and open_tasks() from any thread; the callbacks run on the streams' own thread, one at a
// time.

#include "remote/canopy_remote.grpc.pb.h"

#include <chrono>
#include <cstdint>
#include <deque>
#include <functional>
#include <grpcpp/alarm.h>
#include <grpcpp/grpcpp.h>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

namespace canopy::daemon {

class SessionStreams {
public:
    using Stub = remote::v1::Node::Stub;

    // How long after a failed read the stream's status may take to come before the message is taken as unreadable.
    // A node's status comes with the end of its stream, in the same HTTP/2 frame.
    static constexpr std::chrono::milliseconds READ_END_GRACE{1000};

    SessionStreams(Stub& stub, const remote::v1::AttachRequest& request,
                   std::function<void(const remote::v1::NodeEvent&)> on_event,
                   std::function<void(const remote::v1::TaskReply&)> on_reply,
                   std::function<void(const std::string& which, const grpc::Status&)> on_end);
    SessionStreams(const SessionStreams&) = delete;
    SessionStreams& operator=(const SessionStreams&) = delete;
    // Cancels both streams, waits for their ends (their on_end calls included) and for the thread.
    ~SessionStreams();

    // Opens the Tasks stream (once, after the hello); does nothing once the session's stream has finished.
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
        TASKS_FINISHED,
        EVENTS_GRACE_OVER, // READ_END_GRACE after a failed read of the events
        TASKS_GRACE_OVER   // the same for the replies
    };
    static void* tag(Op op) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(op)); }

    // Runs until both streams have finished, then drains and shuts the queue down.
    void run();
    // One completion; false once nothing is left open.
    bool handle(Op op, bool ok);
    // The Tasks stream's read failed: it has ended, and nothing more is written to it. Finish reports why.
    void finish_tasks();
    // A read of a stream failed: its Finish has READ_END_GRACE to come, or `context` is cancelled.
    void after_failed_read(grpc::Alarm& grace, Op over);
    // The status `on_end` gets: `status`, or DATA_LOSS when the stream was cancelled for a message it could not read.
    static grpc::Status end_status(const grpc::Status& status, bool unreadable, const char* message_name);
    // One stream has finished; false when none is left open.
    bool closed();
    // Moves the oldest queued calls into the next message and writes it. REQUIRES mu_.
    void write_next_locked();
    // Starts the Read of replies if it was deferred. REQUIRES mu_.
    void resume_read_locked();

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
    std::size_t unanswered_ = 0;              // calls sent (or queued) whose replies have not been read
    bool read_deferred_ = false;              // no Read of replies is started: nothing is unanswered
    bool closing_ = false;                    // the destructor cancelled the streams: nothing is deferred
    std::deque<remote::v1::TaskCall> queued_; // not yet in a message
    remote::v1::TaskCalls calls_;             // being written while writing_
    // The graces after a failed read; the streams' thread alone sets, cancels and reads these.
    grpc::Alarm events_grace_;
    grpc::Alarm tasks_grace_;
    bool events_finished_ = false;
    bool tasks_finished_ = false;
    bool events_unreadable_ = false; // cancelled when its grace ran out
    bool tasks_unreadable_ = false;
    std::thread thread_;
};

} // namespace canopy::daemon
