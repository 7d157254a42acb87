// The streams of a node's L4 session that carry work and bytes (daemon/remote_server_impl.h): Tasks, Read and
// Write. Each owns itself until gRPC is done with it.
#include "daemon/chunk_message.h"
#include "daemon/remote_server_impl.h"
#include "daemon/task_batch.h"
#include "protocol/task_args.h"

#include <deque>

namespace canopy::daemon {

// One session's task stream: each TaskCall read (a TaskCalls message holds one or more) is decoded
// (decode_task_call) and submitted to the node's Supervisor; each result is written back as a TaskReply with the
// call's id, in the order the tasks finish, one TaskReplies message at a time holding every reply that queued
// behind the write before it. The stream owns itself until OnDone. Its state is guarded by Shared::mu, which the
// results' callbacks also take, and which OnDone clears, so a result that comes after the stream is gone is dropped.
class TaskStream final : public grpc::ServerBidiReactor<pb::TaskCalls, pb::TaskReplies> {
public:
    static TaskStream* open(RemoteServer::Impl& owner, grpc::CallbackServerContext* context) {
        auto stream = std::unique_ptr<TaskStream>(new TaskStream(owner));
        TaskStream* raw = stream.get();
        raw->self_ = std::move(stream);
        if (const auto error = peer_name_error(*context->auth_context(), owner.tls())) {
            std::lock_guard lock(raw->shared_->mu);
            raw->finish_locked(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, *error));
            return raw;
        }
        raw->StartRead(&raw->in_);
        return raw;
    }

    void OnReadDone(bool ok) override {
        pb::TaskCalls calls;
        {
            std::lock_guard lock(shared_->mu);
            if (!ok) {
                reads_done_ = true;
                finish_if_done_locked();
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
            pending_ += static_cast<std::size_t>(calls.calls_size());
            StartRead(&in_);
        }
        // Unlocked: the Supervisor may answer a refused task on this thread, through answer().
        for (pb::TaskCall& call : *calls.mutable_calls()) {
            submit(call);
        }
    }

    void OnWriteDone(bool ok) override {
        std::lock_guard lock(shared_->mu);
        writing_ = false;
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
    }

    void OnCancel() override {
        std::lock_guard lock(shared_->mu);
        finish_locked(grpc::Status::CANCELLED);
    }

    // The session's tasks still queued on this node are taken back: nobody waits for their results any more.
    void OnDone() override {
        std::uint64_t session = 0;
        {
            std::lock_guard lock(shared_->mu);
            shared_->stream = nullptr;
            session = session_;
        }
        if (session != 0) {
            owner_.withdraw_session_tasks(session);
        }
        auto self = std::move(self_); // destroys this stream when it goes out of scope, the last act here
    }

private:
    struct Shared {
        std::mutex mu;
        TaskStream* stream = nullptr;
    };

    explicit TaskStream(RemoteServer::Impl& owner) : owner_(owner), shared_(std::make_shared<Shared>()) {
        shared_->stream = this;
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
        std::lock_guard lock(shared->mu);
        TaskStream* stream = shared->stream;
        if (stream == nullptr) {
            return; // the stream is gone; its L4 learns of the loss its own way
        }
        --stream->pending_;
        if (stream->finished_ || stream->final_) {
            return;
        }
        pb::TaskReply& reply = stream->queued_.emplace_back();
        reply.set_call_id(call_id);
        reply.set_code(static_cast<std::uint32_t>(code));
        reply.set_message(message);
        reply.set_start_ns(start_ns);
        reply.set_end_ns(end_ns);
        if (!stream->writing_) {
            stream->write_next_locked();
        }
    }

    // Moves the oldest queued replies into the next message and writes it.
    void write_next_locked() {
        out_.clear_replies();
        take_batch(queued_, *out_.mutable_replies());
        writing_ = true;
        StartWrite(&out_);
    }

    // The L4 closed its side and every task it sent was answered and written: the stream ends well.
    void finish_if_done_locked() {
        if (reads_done_ && pending_ == 0 && queued_.empty() && !writing_) {
            finish_locked(grpc::Status::OK);
        }
    }

    // Finishes once, after the write in progress if there is one.
    void finish_locked(const grpc::Status& status) {
        if (finished_) {
            return;
        }
        if (writing_) {
            if (!final_) {
                final_ = status;
            }
            return;
        }
        finished_ = true;
        Finish(status);
    }

    RemoteServer::Impl& owner_;
    std::shared_ptr<Shared> shared_;
    std::unique_ptr<TaskStream> self_;
    pb::TaskCalls in_;
    std::deque<pb::TaskReply> queued_; // not yet in a message
    pb::TaskReplies out_;              // being written while writing_
    bool writing_ = false;
    bool reads_done_ = false;
    bool finished_ = false;
    std::optional<grpc::Status> final_;
    std::size_t pending_ = 0;   // tasks submitted and not yet answered
    std::uint64_t session_ = 0; // of the calls read
};

grpc::ServerBidiReactor<pb::TaskCalls, pb::TaskReplies>*
RemoteServer::Impl::Tasks(grpc::CallbackServerContext* context) {
    return TaskStream::open(*this, context);
}

// A Read: the range is written out in chunks of MAX_CHUNK_BYTES, one write in flight at a time
// (HTTP/2 flow control paces them), each chunk's data a slice of the mapping (chunk_message). A refusal is one chunk
// with its code and message. The stream owns itself until OnDone.
class ReadStream final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
public:
    ReadStream(RemoteServer::Impl& owner, grpc::CallbackServerContext* context, const grpc::ByteBuffer& request) {
        try {
            if (const auto error = peer_name_error(*context->auth_context(), owner.tls())) {
                Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, *error));
                return;
            }
            pb::ReadCall call;
            grpc::ByteBuffer parsed = request; // Deserialize takes its buffer's bytes
            if (!grpc::SerializationTraits<pb::ReadCall>::Deserialize(&parsed, &call).ok()) {
                refuse(ErrorCode::BAD_REQUEST, "read: the call is not the encoding of a ReadCall");
                return;
            }
            const ByteRange range = decode_read_call(call);
            bytes_ = owner.session_bytes(call.session(), range);
            if (bytes_.device) {
                // Device memory: its chip copies the range into a staging buffer first, which is then streamed.
                const BufferInfo device = *bytes_.device;
                SessionBytes staged = owner.staging(range.length);
                owner.chip_copy(device, staged, range.offset, false, [this, staged, device](const TaskResult& r) {
                    if (!r.ok()) {
                        refuse(r.code, "reading device buffer " + to_string(device.descriptor.identity) + " through " +
                                           device.creator + ": " + r.message);
                        return;
                    }
                    bytes_ = staged;
                    next();
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

    void OnWriteDone(bool ok) override {
        if (!ok) {
            Finish(grpc::Status(grpc::StatusCode::CANCELLED, "the L4 stopped reading"));
            return;
        }
        if (refused_) {
            Finish(grpc::Status::OK);
            return;
        }
        next();
    }

    void OnDone() override { delete this; }

private:
    void refuse(ErrorCode code, const std::string& message) {
        refused_ = true;
        pb::Chunk chunk;
        chunk.set_code(static_cast<std::uint32_t>(code));
        chunk.set_message(message.substr(0, MAX_CHUNK_MESSAGE_BYTES));
        bool own = false;
        (void)grpc::SerializationTraits<pb::Chunk>::Serialize(chunk, &out_, &own);
        StartWrite(&out_);
    }

    void next() {
        if (sent_ == bytes_.length) {
            Finish(grpc::Status::OK);
            return;
        }
        if (!keep_) {
            keep_ = std::make_shared<const SessionBytes>(bytes_); // the pages stay mapped while gRPC sends them
        }
        const std::uint64_t n = std::min(MAX_CHUNK_BYTES, bytes_.length - sent_);
        out_ = chunk_message(pb::Chunk{}, bytes_.data + sent_, n, keep_);
        sent_ += n;
        StartWrite(&out_);
    }

    SessionBytes bytes_;
    std::shared_ptr<const void> keep_;
    grpc::ByteBuffer out_;
    std::uint64_t sent_ = 0;
    bool refused_ = false;
};

// A Write: the first chunk names the range; each chunk's data lands after the last, copied once from where gRPC
// received it (scan_chunk). The reply says OK once the stream ended with every byte of the range in place, or
// why not. The stream owns itself until OnDone.
class WriteStream final : public grpc::ServerReadReactor<grpc::ByteBuffer> {
public:
    WriteStream(RemoteServer::Impl& owner, grpc::CallbackServerContext* context, grpc::ByteBuffer* reply)
        : owner_(owner), reply_(reply) {
        if (const auto error = peer_name_error(*context->auth_context(), owner.tls())) {
            Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, *error));
            return;
        }
        StartRead(&in_);
    }

    void OnReadDone(bool ok) override {
        if (!ok) {
            if (received_ != range_.length || range_.length == 0) {
                answer(ErrorCode::BAD_REQUEST, "the write stream ended after " + std::to_string(received_) + " of " +
                                                   std::to_string(range_.length) + " bytes");
                return;
            }
            if (device_) {
                const BufferInfo device = *device_;
                owner_.chip_copy(device, bytes_, range_.offset, true, [this, device](const TaskResult& r) {
                    if (!r.ok()) {
                        answer(r.code, "writing device buffer " + to_string(device.descriptor.identity) + " through " +
                                           device.creator + ": " + r.message);
                        return;
                    }
                    answer(ErrorCode::OK, {});
                });
                return;
            }
            answer(ErrorCode::OK, {});
            return;
        }
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
        StartRead(&in_);
    }

    void OnDone() override { delete this; }

private:
    void answer(ErrorCode code, const std::string& message) {
        pb::BufferReply reply;
        reply.set_code(static_cast<std::uint32_t>(code));
        reply.set_message(message);
        bool own = false;
        (void)grpc::SerializationTraits<pb::BufferReply>::Serialize(reply, reply_, &own);
        Finish(grpc::Status::OK);
    }

    RemoteServer::Impl& owner_;
    grpc::ByteBuffer* reply_;
    grpc::ByteBuffer in_;
    ByteRange range_{};
    SessionBytes bytes_;
    std::optional<BufferInfo> device_; // the device buffer written through bytes_, a staging buffer
    std::uint64_t received_ = 0;
};

grpc::ServerWriteReactor<grpc::ByteBuffer>* RemoteServer::Impl::Read(grpc::CallbackServerContext* context,
                                                                     const grpc::ByteBuffer* call) {
    return new ReadStream(*this, context, *call);
}

grpc::ServerReadReactor<grpc::ByteBuffer>* RemoteServer::Impl::Write(grpc::CallbackServerContext* context,
                                                                     grpc::ByteBuffer* reply) {
    return new WriteStream(*this, context, reply);
}

} // namespace canopy::daemon
