#pragma once
// SessionStreams: a long-lived stream of an L4's session on a remote node, on gRPC's asynchronous API with one
// completion queue and one thread that waits on it. A remote link (daemon/remote_link.cpp) opens the session with
// an Attach stream and reads its events (hello, status, heartbeats); the L4's supervisor sends the session's tasks
// on a Tasks stream (calls out, replies back) from its own process (daemon/remote_tasks.h). Each is made with its
// own constructor.
//
// That thread is the only one of its process that waits in gRPC's poller for the stream. gRPC's callback API
// runs reactors on two threads of its own that take turns at polling the channel's socket, so that each message
// read also wakes the other to take over the polling; a blocking Read on a thread of one's own joins the same
// rotation (docs/performance.md, "Wake-ups per task"). On a machine with CPUs to spare the thread polls the queue
// for QUEUE_POLL after each event before it blocks (next_event), so that a task's reply finds it awake.
//
// send() queues a call: one message is written at a time and holds every call queued behind the write before it
// (MAX_BATCH_CALLS, MAX_BATCH_BYTES). Each event read goes to `on_event`, each message of replies to `on_replies`,
// and the end of the stream, whatever ended it, to `on_end` once, all on the stream's thread. Replies are read
// while a call is unanswered: once every call has its reply, the next Read starts with the next call, after its
// write (see REPLIES_READ in handle()).
//
// A read fails when the node ended the stream, and also when a message came that protobuf could not parse (a
// string that is not UTF-8, say). gRPC does not end the call then, and Finish would wait for a status the node
// never sends: a read that failed and whose Finish has not come within READ_END_GRACE cancels the stream, and
// `on_end` gets DATA_LOSS naming the message that could not be read.
//
// Thread safety: send() from any thread; the callbacks run on the stream's own thread, one at a time, and may call
// send().

#include "remote/canopy_remote.grpc.pb.h"

#include <chrono>
#include <condition_variable>
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

// How a gRPC status reads in the messages of a lost host: "UNAVAILABLE: node hb is stopping".
std::string describe_status(const grpc::Status& status);

class SessionStreams {
public:
    using Stub = remote::v1::Node::Stub;

    // How long after a failed read the stream's status may take to come before the message is taken as unreadable.
    // A node's status comes with the end of its stream, in the same HTTP/2 frame.
    static constexpr std::chrono::milliseconds READ_END_GRACE{1000};
    // How long a Tasks stream whose every call has its reply waits for the next call before it reads anyway. The
    // Read then pending ends the stream as soon as its connection breaks; without one, a break while no call is out
    // would go unnoticed until the next call. One alarm at a time: at most one such wake-up per IDLE_READ_AFTER.
    static constexpr std::chrono::milliseconds IDLE_READ_AFTER{50};

    using OnReplies = std::function<void(const remote::v1::TaskReplies&)>;
    using OnEnd = std::function<void(const std::string& which, const grpc::Status&)>;

    // The session's Attach stream: `on_end` gets "session".
    SessionStreams(Stub& stub, const remote::v1::AttachRequest& request,
                   std::function<void(const remote::v1::NodeEvent&)> on_event, OnEnd on_end);
    // A Tasks stream of a session that another process attached: `on_end` gets "task stream".
    SessionStreams(Stub& stub, OnReplies on_replies, OnEnd on_end);
    SessionStreams(const SessionStreams&) = delete;
    SessionStreams& operator=(const SessionStreams&) = delete;
    // Cancels the stream, waits for its end (its on_end call included) and for the thread.
    ~SessionStreams();

    // Queues a call on a Tasks stream; it goes out in the next message written.
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
        TASKS_GRACE_OVER,  // the same for the replies
        IDLE_READ          // IDLE_READ_AFTER passed since a Read of replies was deferred
    };
    static void* tag(Op op) { return reinterpret_cast<void*>(static_cast<std::uintptr_t>(op)); }

    // Runs until the stream has finished, then drains and shuts the queue down.
    void run();
    // One completion; false once the stream has finished.
    bool handle(Op op, bool ok);
    // The Tasks stream's read failed: it has ended, and nothing more is written to it. Finish reports why.
    void finish_tasks();
    // A read of a stream failed: its Finish has READ_END_GRACE to come, or `context` is cancelled.
    void after_failed_read(grpc::Alarm& grace, Op over);
    // The status `on_end` gets: `status`, or DATA_LOSS when the stream was cancelled for a message it could not read.
    static grpc::Status end_status(const grpc::Status& status, bool unreadable, const char* message_name);
    // Moves the oldest queued calls into the next message and writes it. REQUIRES mu_.
    void write_next_locked();
    // Starts the Read of replies if it was deferred. REQUIRES mu_.
    void resume_read_locked();

    Stub& stub_;
    std::function<void(const remote::v1::NodeEvent&)> on_event_;
    OnReplies on_replies_;
    OnEnd on_end_;
    grpc::CompletionQueue cq_;
    grpc::ClientContext events_context_;
    std::unique_ptr<grpc::ClientAsyncReader<remote::v1::NodeEvent>> events_; // null for a Tasks stream
    remote::v1::NodeEvent event_;
    grpc::Status events_status_;
    grpc::ClientContext tasks_context_;
    std::unique_ptr<grpc::ClientAsyncReaderWriter<remote::v1::TaskCalls, remote::v1::TaskReplies>>
        tasks_; // null for an Attach stream
    remote::v1::TaskReplies replies_;
    grpc::Status tasks_status_;
    std::mutex mu_;
    std::condition_variable started_cv_; // the constructor has started the stream's call
    bool started_ = false;
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
    grpc::Alarm idle_read_; // set under mu_ while idle_read_set_
    bool idle_read_set_ = false;
    bool events_finished_ = false;
    bool tasks_finished_ = false;
    bool events_unreadable_ = false; // cancelled when its grace ran out
    bool tasks_unreadable_ = false;
    std::thread thread_;
};

} // namespace canopy::daemon
