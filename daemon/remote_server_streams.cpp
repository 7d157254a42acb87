// The calls of a node's L4 session that carry work and bytes (daemon/remote_server_impl.h): Tasks, Read and Write,
// on the node's completion queue. Each deletes itself once nothing of it is in progress (ServerCall).
#include "daemon/chunk_message.h"
#include "daemon/remote_server_impl.h"
#include "daemon/task_batch.h"
#include "protocol/task_args.h"

#include <chrono>
#include <deque>
#include <grpcpp/alarm.h>

namespace canopy::daemon {

namespace {

// One session's task stream: each TaskCall read (a TaskCalls message holds one or more) is decoded
// (decode_task_call) and submitted to the node's Supervisor; each result is written back as a TaskReply with the
// call's id, in the order the tasks finish, one TaskReplies message at a time holding every reply that queued
// behind the write before it. The Read after calls that found the stream idle waits for their first reply
// (defer_read_locked). The results' callbacks reach the stream through Shared, whose pointer retire() clears, so a
// result that comes after the stream is gone is dropped. Lock order: Shared::mu, then mu_.
class TaskStream final : public ServerCall {
public:
    // The longest a Read waits after a message of calls for that message's first reply: about one remote
    // round trip of a no-op task.
    static constexpr std::chrono::microseconds READ_DEFER{200};

    static void request(RemoteServer::Impl& owner) {
        auto* stream = new TaskStream(owner);
        stream->context_.AsyncNotifyWhenDone(stream->tag(DONE));
        owner.service().RequestTasks(&stream->context_, &stream->stream_, owner.queue(), owner.queue(),
                                     stream->tag(REQUESTED));
    }

private:
    struct Shared {
        std::mutex mu;
        TaskStream* stream = nullptr;
    };

    explicit TaskStream(RemoteServer::Impl& owner)
        : ServerCall(owner), stream_(&context_), shared_(std::make_shared<Shared>()) {
        shared_->stream = this;
    }

    void proceed(Step step, bool ok) override {
        switch (step) {
        case REQUESTED: {
            if (!ok) {
                return; // the server is shutting down: no call came, and none will
            }
            request(owner_);
            std::lock_guard lock(mu_);
            hold(); // DONE
            if (const auto error = peer_name_error(*context_.auth_context(), owner_.tls())) {
                owner_.refused_call("Tasks", context_.peer(), *error);
                finish_locked(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, *error));
                return;
            }
            read_next_locked();
            return;
        }
        case READ:
            calls_read(ok);
            return;
        case WRITTEN: {
            std::lock_guard lock(mu_);
            writing_ = false;
            if (over_) {
                return;
            }
            if (!ok && !finished_) {
                final_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the L4 stopped reading its task stream");
            }
            if (final_) {
                finish_locked(*final_);
                return;
            }
            if (!queued_.empty()) {
                write_next_locked();
            }
            finish_if_done_locked();
            return;
        }
        case DONE: {
            std::lock_guard lock(mu_);
            over_ = true; // finished, or cancelled (the L4 went away): nothing more is written
            return;
        }
        case ALARM: {
            // READ_DEFER passed, or a reply's write cancelled the alarm: a read still deferred starts now.
            std::lock_guard lock(mu_);
            alarm_set_ = false;
            resume_read_locked();
            return;
        }
        case FINISHED:
        case STEPS:
            return;
        }
    }

    // The session's tasks still queued on this node are taken back: nobody waits for their results any more.
    void retire() override {
        {
            std::lock_guard lock(shared_->mu);
            shared_->stream = nullptr;
        }
        if (session_ != 0) {
            owner_.withdraw_session_tasks(session_);
        }
        delete this;
    }

    void calls_read(bool ok) {
        pb::TaskCalls calls;
        {
            std::lock_guard lock(mu_);
            if (!ok) {
                reads_done_ = true;
                finish_if_done_locked();
                return;
            }
            if (over_) {
                return;
            }
            std::optional<std::uint64_t> checked; // the session of the calls before, in this message
            for (const pb::TaskCall& call : in_.calls()) {
                if (call.session() == checked) {
                    continue;
                }
                if (const std::string refusal = owner_.session_refusal(call.session()); !refusal.empty()) {
                    finish_locked(grpc::Status(grpc::StatusCode::ABORTED, refusal));
                    return;
                }
                checked = call.session();
                session_ = call.session();
            }
            calls.Swap(&in_);
            // Calls to a stream with nothing else in progress: the L4 waits for their replies (defer_read_locked).
            const bool idle = pending_ == 0 && queued_.empty() && !writing_;
            pending_ += static_cast<std::size_t>(calls.calls_size());
            if (idle && calls.calls_size() > 0) {
                defer_read_locked();
            } else {
                read_next_locked();
            }
        }
        // Unlocked: the Supervisor may answer a refused task on this thread, through answer().
        for (pb::TaskCall& call : *calls.mutable_calls()) {
            submit(call);
        }
    }

    void submit(const pb::TaskCall& call) {
        const std::uint64_t call_id = call.call_id();
        TaskRequest request;
        try {
            request = decode_task_call(call);
        } catch (const WireError& e) {
            answer(shared_, call_id, e.code(), std::string("task.args: ") + e.what(), 0, 0);
            return;
        } catch (const RequestError& e) {
            answer(shared_, call_id, e.code(), e.what(), 0, 0);
            return;
        }
        request.group = call.session();
        owner_.supervisor().submit(std::move(request), [shared = shared_, call_id](TaskResult r) {
            answer(shared, call_id, r.code, r.message, r.start_ns, r.end_ns);
        });
    }

    static void answer(const std::shared_ptr<Shared>& shared, std::uint64_t call_id, ErrorCode code,
                       const std::string& message, std::uint64_t start_ns, std::uint64_t end_ns) {
        std::lock_guard gone(shared->mu);
        TaskStream* stream = shared->stream;
        if (stream == nullptr) {
            return; // the stream is gone; its L4 learns of the loss its own way
        }
        std::lock_guard lock(stream->mu_);
        --stream->pending_;
        if (stream->finished_ || stream->final_ || stream->over_) {
            return;
        }
        pb::TaskReply& reply = stream->queued_.emplace_back();
        reply.set_call_id(call_id);
        reply.set_code(static_cast<std::uint32_t>(code));
        reply.set_message(valid_utf8(message));
        reply.set_start_ns(start_ns);
        reply.set_end_ns(end_ns);
        if (!stream->writing_) {
            stream->write_next_locked();
        }
        stream->resume_read_locked();
    }

    void read_next_locked() {
        hold();
        stream_.Read(&in_, tag(READ));
    }

    // The Read after calls that found the stream idle waits for the first reply written after them, or
    // READ_DEFER at most. gRPC gives the L4 back the flow-control credit of a message when the next Read starts,
    // in a WINDOW_UPDATE of its own: started at once, that update crosses the link alone ahead of the reply, and
    // the L4 wakes for it and acknowledges it (docs/performance.md, "Flow-control updates"). Started after
    // the reply's write, it goes in the reply's segment. Calls the L4 sends meanwhile wait in the transport;
    // READ_DEFER bounds that wait when the first task runs long. A stream with work in progress reads at once:
    // under load a deferred Read would cost each message a second wake-up of this thread.
    void defer_read_locked() {
        read_deferred_ = true;
        if (!alarm_set_) {
            alarm_set_ = true;
            hold();
            read_alarm_.Set(owner_.queue(), std::chrono::system_clock::now() + READ_DEFER, tag(ALARM));
        }
    }

    // Starts the deferred Read, if there is one, and calls the alarm off.
    void resume_read_locked() {
        if (!read_deferred_) {
            return;
        }
        read_deferred_ = false;
        if (!over_ && !finished_) {
            read_next_locked();
        }
        if (alarm_set_) {
            read_alarm_.Cancel(); // its tag comes back at once, not ok
        }
    }

    // Moves the oldest queued replies into the next message and writes it.
    void write_next_locked() {
        out_.clear_replies();
        take_batch(queued_, *out_.mutable_replies());
        writing_ = true;
        hold();
        stream_.Write(out_, tag(WRITTEN));
    }

    // The L4 closed its side and every task it sent was answered and written: the stream ends well.
    void finish_if_done_locked() {
        if (reads_done_ && pending_ == 0 && queued_.empty() && !writing_) {
            finish_locked(grpc::Status::OK);
        }
    }

    // Finishes once, after the write in progress if there is one; not at all once the call is over.
    void finish_locked(const grpc::Status& status) {
        if (finished_ || over_) {
            return;
        }
        if (writing_) {
            if (!final_) {
                final_ = status;
            }
            return;
        }
        finished_ = true;
        hold();
        stream_.Finish(status, tag(FINISHED));
    }

    grpc::ServerAsyncReaderWriter<pb::TaskReplies, pb::TaskCalls> stream_;
    std::shared_ptr<Shared> shared_;
    pb::TaskCalls in_;
    std::deque<pb::TaskReply> queued_; // not yet in a message
    pb::TaskReplies out_;              // being written while writing_
    grpc::Alarm read_alarm_;
    bool alarm_set_ = false;     // read_alarm_'s tag has not come back yet
    bool read_deferred_ = false; // a message of calls was read, and the next Read waits (defer_read_locked)
    bool writing_ = false;
    bool reads_done_ = false;
    bool finished_ = false;
    bool over_ = false; // DONE came
    std::optional<grpc::Status> final_;
    std::size_t pending_ = 0;   // tasks submitted and not yet answered
    std::uint64_t session_ = 0; // of the calls read
};

// A Read: the range is written out in chunks of MAX_CHUNK_BYTES, one write in flight at a time (HTTP/2 flow control
// paces them), each chunk's data a slice of the mapping (chunk_message). A refusal is one chunk with its code and
// message. The range is looked up and mapped on the node's worker.
class ReadStream final : public ServerCall {
public:
    static void request(RemoteServer::Impl& owner) {
        auto* stream = new ReadStream(owner);
        owner.service().RequestRead(&stream->context_, &stream->request_, &stream->writer_, owner.queue(),
                                    owner.queue(), stream->tag(REQUESTED));
    }

private:
    explicit ReadStream(RemoteServer::Impl& owner) : ServerCall(owner), writer_(&context_) {}

    void proceed(Step step, bool ok) override {
        switch (step) {
        case REQUESTED:
            if (!ok) {
                return;
            }
            request(owner_);
            if (const auto error = peer_name_error(*context_.auth_context(), owner_.tls())) {
                owner_.refused_call("Read", context_.peer(), *error);
                finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, *error));
                return;
            }
            keep();
            owner_.offload([this] {
                begin();
                release();
            });
            return;
        case WRITTEN:
            if (!ok) {
                finish(grpc::Status(grpc::StatusCode::CANCELLED, "the L4 stopped reading"));
            } else if (refused_) {
                finish(grpc::Status::OK);
            } else {
                next();
            }
            return;
        case READ:
        case FINISHED:
        case DONE:
        case ALARM:
        case STEPS:
            return;
        }
    }

    // On the worker: the range found, and mapped or staged.
    void begin() {
        try {
            pb::ReadCall call;
            if (!grpc::SerializationTraits<pb::ReadCall>::Deserialize(&request_, &call).ok()) {
                refuse(ErrorCode::BAD_REQUEST, "read: the call is not the encoding of a ReadCall");
                return;
            }
            const ByteRange range = decode_read_call(call);
            bytes_ = owner_.session_bytes(call.session(), range);
            if (bytes_.device) {
                // Device memory: its chip copies the range into a staging buffer first, which is then streamed.
                const BufferInfo device = *bytes_.device;
                SessionBytes staged = owner_.staging(range.length);
                keep();
                owner_.chip_copy(device, staged, range.offset, false, [this, staged, device](const TaskResult& r) {
                    if (!r.ok()) {
                        refuse(r.code, "reading device buffer " + to_string(device.descriptor.identity) + " through " +
                                           device.creator + ": " + r.message);
                    } else {
                        bytes_ = staged;
                        next();
                    }
                    release();
                });
                return;
            }
        } catch (const RequestError& e) {
            refuse(e.code(), e.what());
            return;
        } catch (const std::exception& e) {
            refuse(ErrorCode::BAD_REQUEST, e.what());
            return;
        }
        next();
    }

    void refuse(ErrorCode code, const std::string& message) {
        refused_ = true;
        pb::Chunk chunk;
        chunk.set_code(static_cast<std::uint32_t>(code));
        chunk.set_message(valid_utf8(message, MAX_CHUNK_MESSAGE_BYTES));
        bool own = false;
        (void)grpc::SerializationTraits<pb::Chunk>::Serialize(chunk, &out_, &own);
        write();
    }

    void next() {
        if (sent_ == bytes_.length) {
            finish(grpc::Status::OK);
            return;
        }
        if (!keep_) {
            keep_ = std::make_shared<const SessionBytes>(bytes_); // the pages stay mapped while gRPC sends them
        }
        const std::uint64_t n = std::min(MAX_CHUNK_BYTES, bytes_.length - sent_);
        out_ = chunk_message(pb::Chunk{}, bytes_.data + sent_, n, keep_);
        sent_ += n;
        write();
    }

    void write() {
        std::lock_guard lock(mu_);
        hold();
        writer_.Write(out_, tag(WRITTEN));
    }

    void finish(const grpc::Status& status) {
        std::lock_guard lock(mu_);
        hold();
        writer_.Finish(status, tag(FINISHED));
    }

    grpc::ByteBuffer request_;
    grpc::ServerAsyncWriter<grpc::ByteBuffer> writer_;
    SessionBytes bytes_;
    std::shared_ptr<const void> keep_;
    grpc::ByteBuffer out_;
    std::uint64_t sent_ = 0;
    bool refused_ = false;
};

// A Write: the first chunk names the range, which is looked up and mapped (or staged) on the node's worker; each
// chunk's data lands after the last, copied once from where gRPC received it (scan_chunk). The reply says OK once
// the stream ended with every byte of the range in place, or why not.
class WriteStream final : public ServerCall {
public:
    static void request(RemoteServer::Impl& owner) {
        auto* stream = new WriteStream(owner);
        owner.service().RequestWrite(&stream->context_, &stream->reader_, owner.queue(), owner.queue(),
                                     stream->tag(REQUESTED));
    }

private:
    explicit WriteStream(RemoteServer::Impl& owner) : ServerCall(owner), reader_(&context_) {}

    void proceed(Step step, bool ok) override {
        switch (step) {
        case REQUESTED: {
            if (!ok) {
                return;
            }
            request(owner_);
            std::lock_guard lock(mu_);
            hold();
            if (const auto error = peer_name_error(*context_.auth_context(), owner_.tls())) {
                owner_.refused_call("Write", context_.peer(), *error);
                reader_.FinishWithError(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, *error), tag(FINISHED));
                return;
            }
            reader_.Read(&in_, tag(READ));
            return;
        }
        case READ:
            if (!ok) {
                ended();
            } else if (range_.length == 0) {
                keep();
                owner_.offload([this] {
                    take_chunk();
                    release();
                });
            } else {
                take_chunk();
            }
            return;
        case WRITTEN:
        case FINISHED:
        case DONE:
        case ALARM:
        case STEPS:
            return;
        }
    }

    // A chunk read: its bytes land in the range, and the next is read.
    void take_chunk() {
        try {
            const ChunkLayout chunk = scan_chunk(in_, "write");
            if (range_.length == 0) {
                range_ = decode_write_head(chunk);
                bytes_ = owner_.session_bytes(chunk.session, range_);
                if (bytes_.device) {
                    // Device memory: the bytes land in a staging buffer, which its chip copies in at the end.
                    device_ = bytes_.device;
                    bytes_ = owner_.staging(range_.length);
                }
            }
            const std::uint64_t n = chunk.data_size;
            if (n > range_.length - received_) {
                throw RequestError(ErrorCode::BAD_REQUEST, "write.data: " + std::to_string(received_ + n) +
                                                               " bytes for a range of " +
                                                               std::to_string(range_.length));
            }
            copy_chunk_data(in_, chunk, bytes_.data + received_);
            received_ += n;
        } catch (const RequestError& e) {
            answer(e.code(), e.what());
            return;
        } catch (const std::exception& e) {
            answer(ErrorCode::BAD_REQUEST, e.what());
            return;
        }
        std::lock_guard lock(mu_);
        hold();
        reader_.Read(&in_, tag(READ));
    }

    // The L4 closed its side: the range is complete, or the reply says how much came.
    void ended() {
        if (received_ != range_.length || range_.length == 0) {
            answer(ErrorCode::BAD_REQUEST, "the write stream ended after " + std::to_string(received_) + " of " +
                                               std::to_string(range_.length) + " bytes");
            return;
        }
        if (!device_) {
            answer(ErrorCode::OK, {});
            return;
        }
        const BufferInfo device = *device_;
        keep();
        owner_.chip_copy(device, bytes_, range_.offset, true, [this, device](const TaskResult& r) {
            if (!r.ok()) {
                answer(r.code, "writing device buffer " + to_string(device.descriptor.identity) + " through " +
                                   device.creator + ": " + r.message);
            } else {
                answer(ErrorCode::OK, {});
            }
            release();
        });
    }

    void answer(ErrorCode code, const std::string& message) {
        pb::BufferReply reply;
        reply.set_code(static_cast<std::uint32_t>(code));
        reply.set_message(valid_utf8(message));
        bool own = false;
        (void)grpc::SerializationTraits<pb::BufferReply>::Serialize(reply, &reply_, &own);
        std::lock_guard lock(mu_);
        hold();
        reader_.Finish(reply_, grpc::Status::OK, tag(FINISHED));
    }

    grpc::ServerAsyncReader<grpc::ByteBuffer, grpc::ByteBuffer> reader_;
    grpc::ByteBuffer in_;
    grpc::ByteBuffer reply_;
    ByteRange range_{};
    SessionBytes bytes_;
    std::optional<BufferInfo> device_; // the device buffer written through bytes_, a staging buffer
    std::uint64_t received_ = 0;
};

} // namespace

void request_stream_calls(RemoteServer::Impl& owner) {
    TaskStream::request(owner);
    ReadStream::request(owner);
    WriteStream::request(owner);
}

} // namespace canopy::daemon
