#include "daemon/remote_session_streams.h"

#include "daemon/queue_poll.h"
#include "daemon/task_batch.h"

namespace canopy::daemon {
namespace pb = canopy::remote::v1;

namespace {

std::string grpc_code_name(grpc::StatusCode code) {
    switch (code) {
    case grpc::StatusCode::CANCELLED:
        return "CANCELLED";
    case grpc::StatusCode::DEADLINE_EXCEEDED:
        return "DEADLINE_EXCEEDED";
    case grpc::StatusCode::UNAUTHENTICATED:
        return "UNAUTHENTICATED";
    case grpc::StatusCode::UNAVAILABLE:
        return "UNAVAILABLE";
    case grpc::StatusCode::ABORTED:
        return "ABORTED";
    case grpc::StatusCode::FAILED_PRECONDITION:
        return "FAILED_PRECONDITION";
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
        return "RESOURCE_EXHAUSTED";
    case grpc::StatusCode::DATA_LOSS:
        return "DATA_LOSS";
    case grpc::StatusCode::OK:
        return "OK";
    case grpc::StatusCode::UNKNOWN:
        return "UNKNOWN";
    case grpc::StatusCode::INTERNAL:
        return "INTERNAL";
    default:
        return "gRPC status " + std::to_string(static_cast<int>(code));
    }
}

} // namespace

std::string describe_status(const grpc::Status& status) {
    return grpc_code_name(status.error_code()) +
           (status.error_message().empty() ? std::string() : ": " + status.error_message());
}

SessionStreams::SessionStreams(Stub& stub, const pb::AttachRequest& request,
                               std::function<void(const pb::NodeEvent&)> on_event, OnEnd on_end)
    : stub_(stub), on_event_(std::move(on_event)), on_end_(std::move(on_end)) {
    // The thread first: a thread that cannot start leaves no call on the queue, whose destruction would then abort.
    thread_ = std::thread([this] { run(); });
    std::lock_guard lock(mu_);
    events_ = stub_.PrepareAsyncAttach(&events_context_, request, &cq_);
    events_->StartCall(tag(Op::EVENTS_STARTED));
    started_ = true;
    started_cv_.notify_all();
}

SessionStreams::SessionStreams(Stub& stub, OnReplies on_replies, OnEnd on_end)
    : stub_(stub), on_replies_(std::move(on_replies)), on_end_(std::move(on_end)) {
    thread_ = std::thread([this] { run(); }); // first, as above
    std::lock_guard lock(mu_);
    tasks_ = stub_.PrepareAsyncTasks(&tasks_context_, &cq_);
    tasks_->StartCall(tag(Op::TASKS_STARTED));
    started_ = true;
    started_cv_.notify_all();
}

SessionStreams::~SessionStreams() {
    if (events_) {
        events_context_.TryCancel();
    }
    {
        std::lock_guard lock(mu_);
        closing_ = true; // a reply read now restarts the Read instead of deferring it
        if (tasks_) {
            tasks_context_.TryCancel();
            resume_read_locked(); // the Tasks stream ends through a failed Read and its Finish
        }
        if (idle_read_set_) {
            idle_read_.Cancel(); // its tag comes back at once, not ok
        }
    }
    thread_.join();
}

void SessionStreams::send(pb::TaskCall call) {
    std::lock_guard lock(mu_);
    queued_.push_back(std::move(call));
    ++unanswered_;
    if (writing_ || !tasks_ready_ || tasks_ended_) {
        return; // goes out with the next write; a deferred Read starts after that write (CALLS_WRITTEN)
    }
    write_next_locked();
    // After the write: the Read's flow-control update then follows the call instead of going ahead of it.
    resume_read_locked();
}

void SessionStreams::resume_read_locked() {
    if (read_deferred_) {
        read_deferred_ = false;
        tasks_->Read(&replies_, tag(Op::REPLIES_READ));
    }
}

void SessionStreams::run() {
    {
        // The stream's call is made once this thread runs; what the constructor set is read here from now on.
        std::unique_lock lock(mu_);
        started_cv_.wait(lock, [&] { return started_; });
    }
    void* got = nullptr;
    bool ok = false;
    while (next_event(cq_, &got, &ok)) {
        if (!handle(static_cast<Op>(reinterpret_cast<std::uintptr_t>(got)), ok)) {
            cq_.Shutdown();
        }
    }
}

bool SessionStreams::handle(Op op, bool ok) {
    switch (op) {
    case Op::EVENTS_STARTED:
    case Op::EVENT_READ:
        if (op == Op::EVENT_READ && ok) {
            on_event_(event_);
        }
        if (ok) {
            events_->Read(&event_, tag(Op::EVENT_READ));
        } else {
            events_->Finish(&events_status_, tag(Op::EVENTS_FINISHED));
            if (op == Op::EVENT_READ) {
                after_failed_read(events_grace_, Op::EVENTS_GRACE_OVER);
            }
        }
        return true;
    case Op::EVENTS_FINISHED:
        events_finished_ = true;
        events_grace_.Cancel();
        on_end_("session", end_status(events_status_, events_unreadable_, "an event"));
        return false;
    case Op::EVENTS_GRACE_OVER:
        if (ok && !events_finished_) {
            events_unreadable_ = true;
            events_context_.TryCancel();
        }
        return true;
    case Op::TASKS_GRACE_OVER:
        if (ok && !tasks_finished_) {
            tasks_unreadable_ = true;
            tasks_context_.TryCancel();
        }
        return true;
    case Op::TASKS_STARTED:
        if (ok) {
            std::lock_guard lock(mu_);
            tasks_ready_ = true;
            if (!queued_.empty()) {
                write_next_locked();
            }
            tasks_->Read(&replies_, tag(Op::REPLIES_READ));
        } else {
            finish_tasks();
        }
        return true;
    case Op::REPLIES_READ:
        if (ok) {
            pb::TaskReplies replies;
            replies.Swap(&replies_);
            {
                // Every call sent gets one reply. With none left unanswered the next Read waits for the next
                // call (send): gRPC returns the flow-control credit of the replies read when the next Read
                // starts, in a WINDOW_UPDATE of its own, which started now would cross the link alone and wake
                // the node for nothing; started with the next call it goes in that call's segment. The session's
                // Attach stream, which the link reads, notices a lost node meanwhile.
                std::lock_guard lock(mu_);
                unanswered_ -= std::min(unanswered_, static_cast<std::size_t>(replies.replies_size()));
                if (unanswered_ == 0 && !closing_) {
                    read_deferred_ = true;
                    if (!idle_read_set_) {
                        idle_read_set_ = true;
                        idle_read_.Set(&cq_, std::chrono::system_clock::now() + IDLE_READ_AFTER, tag(Op::IDLE_READ));
                    }
                } else {
                    tasks_->Read(&replies_, tag(Op::REPLIES_READ));
                }
            }
            on_replies_(replies);
        } else {
            finish_tasks();
            after_failed_read(tasks_grace_, Op::TASKS_GRACE_OVER);
        }
        return true;
    case Op::CALLS_WRITTEN: {
        std::lock_guard lock(mu_);
        writing_ = false;
        if (ok && !tasks_ended_ && !queued_.empty()) {
            write_next_locked();
        }
        // A failed write means the stream is broken: its read fails too, and Finish says why.
        if (!ok || unanswered_ > 0) {
            resume_read_locked();
        }
        return true;
    }
    case Op::IDLE_READ: {
        // A Read still deferred starts now, so that a broken connection ends the stream while no call is out.
        std::lock_guard lock(mu_);
        idle_read_set_ = false;
        if (ok) {
            resume_read_locked();
        }
        return true;
    }
    case Op::TASKS_FINISHED:
        tasks_finished_ = true;
        tasks_grace_.Cancel();
        on_end_("task stream", end_status(tasks_status_, tasks_unreadable_, "a reply"));
        return false;
    }
    return true;
}

void SessionStreams::after_failed_read(grpc::Alarm& grace, Op over) {
    grace.Set(&cq_, std::chrono::system_clock::now() + READ_END_GRACE, tag(over));
}

grpc::Status SessionStreams::end_status(const grpc::Status& status, bool unreadable, const char* message_name) {
    if (!unreadable) {
        return status;
    }
    return {grpc::StatusCode::DATA_LOSS,
            std::string(message_name) +
                " from the node could not be read (protobuf refused the message: a string in it that is not UTF-8, "
                "or bytes that are not the message's encoding)"};
}

void SessionStreams::finish_tasks() {
    {
        std::lock_guard lock(mu_);
        tasks_ended_ = true;
    }
    tasks_->Finish(&tasks_status_, tag(Op::TASKS_FINISHED));
}

void SessionStreams::write_next_locked() {
    calls_.clear_calls();
    take_batch(queued_, *calls_.mutable_calls());
    writing_ = true;
    tasks_->Write(calls_, tag(Op::CALLS_WRITTEN));
}

} // namespace canopy::daemon
