#pragma once
// The inside of RemoteServer (daemon/remote_server.h), shared by its files: RemoteServer::Impl, the gRPC service
// with the node's session, its buffers and their mappings (remote_server.cpp); the session's event stream
// (SessionStream); and what the byte streams of remote_server_streams.cpp move (SessionBytes, StagingBuffer). The
// task stream and the Read and Write streams are in remote_server_streams.cpp.
//
// Thread safety: as RemoteServer::Impl's comments say; an internal header of the daemon.

#include "daemon/chunk_message.h"
#include "daemon/host_window.h"
#include "daemon/json_codec.h"
#include "daemon/queue_poll.h"
#include "daemon/remote_call.h"
#include "daemon/remote_credentials.h"
#include "daemon/remote_server.h"
#include "daemon/serial_worker.h"
#include "daemon/staged_copy.h"
#include "remote/canopy_remote.grpc.pb.h"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <grpcpp/grpcpp.h>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <time.h>
#include <unistd.h>

namespace canopy::daemon {
namespace pb = canopy::remote::v1;

namespace remote_detail {

inline std::uint64_t monotonic_now_ns() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(ts.tv_nsec);
}

// How often the ticker looks for a changed tree and a heartbeat due.
inline constexpr std::chrono::milliseconds TICK{50};

} // namespace remote_detail

// A range of a session's buffer as a Read or a Write moves it: data..data + length, inside `mapping`.
// A device buffer's range is staged: `device` is then the buffer, and a Read or a Write moves its bytes through a
// staging buffer (staging()) that its chip's copy fills or empties.
struct SessionBytes {
    std::shared_ptr<const HostWindow> mapping;
    std::byte* data = nullptr;
    std::uint64_t length = 0;
    std::optional<BufferInfo> device;
    BufferDescriptor staging{};       // of a staging buffer
    std::shared_ptr<const void> keep; // a staging buffer: released when the last holder goes
};

// A staging buffer of the node's, released when the last SessionBytes naming it goes.
struct StagingBuffer {
    StagingBuffer(Supervisor& s, const CanonicalIdentity& i) : supervisor(s), id(i) {}
    StagingBuffer(const StagingBuffer&) = delete;
    StagingBuffer& operator=(const StagingBuffer&) = delete;
    Supervisor& supervisor;
    CanonicalIdentity id;
    ~StagingBuffer() {
        try {
            (void)supervisor.release_buffer(id);
        } catch (const std::exception&) {
            // released already (the node is stopping)
        }
    }
};

// The node's gRPC service: every method asynchronous, served on the node's one completion queue by one thread, the
// only thread of the node that waits in gRPC's poller. (gRPC's callback API runs its reactors on two threads that
// take turns polling the socket, which costs every message read a hand-off between them: docs/performance.md,
// "Wake-ups per task".) On a machine with CPUs to spare that thread polls the queue for a while after each event
// before it blocks (next_event), so that the L4's next task finds it awake. Read and Write are raw: their chunks are
// parsed and written in place (daemon/chunk_message.h).
using NodeService = pb::Node::WithAsyncMethod_Attach<pb::Node::WithAsyncMethod_Tasks<
    pb::Node::WithAsyncMethod_Echo<pb::Node::WithAsyncMethod_Buffer<pb::Node::WithRawMethod_Read<
        pb::Node::WithRawMethod_Write<pb::Node::WithAsyncMethod_Module<pb::Node::Service>>>>>>>;

// One call of the node's service. Each operation started on it names one of its tags; the queue's thread hands the
// completion to proceed(). The call counts what it has in progress (busy_): operations on the queue, and work
// elsewhere that comes back to it (hold()), such as a module load or a chip's copy; when the count falls to
// zero, retire() deletes it. A streaming call also waits for gRPC's notice that the call is over (DONE), which comes
// when it finished or was cancelled, and starts nothing after it, so that the count can fall to zero at all.
//
// Thread safety: mu_ guards a call's state; operations start under it, from the queue's thread or any other.
class ServerCall {
public:
    ServerCall(const ServerCall&) = delete;
    ServerCall& operator=(const ServerCall&) = delete;
    virtual ~ServerCall() = default;

    // One completion from the queue; `tag` is one a call started an operation with.
    static void complete(void* tag, bool ok);

protected:
    enum Step : std::uint8_t { REQUESTED, READ, WRITTEN, FINISHED, DONE, ALARM, STEPS };

    explicit ServerCall(RemoteServer::Impl& owner);

    void* tag(Step step) noexcept { return &tags_[step]; }
    // Counts an operation about to start, or work that will come back with release(). REQUIRES mu_.
    void hold() noexcept { ++busy_; }
    // hold() for work elsewhere, taking mu_.
    void keep() {
        std::lock_guard lock(mu_);
        hold();
    }
    // Ends work counted by hold(); retires the call when nothing else is in progress. Must not hold mu_.
    void release();
    // What the completion of `step` means to the call. Runs without mu_, on the queue's thread.
    virtual void proceed(Step step, bool ok) = 0;
    // The call is over and nothing of it is in progress: deletes it.
    virtual void retire() { delete this; }

    RemoteServer::Impl& owner_;
    grpc::ServerContext context_;
    std::mutex mu_;

private:
    struct Tag {
        ServerCall* call;
        Step step;
    };
    std::array<Tag, STEPS> tags_;
    int busy_ = 1; // the request for the call
};

// One session's event stream (Attach). The ticker writes its events, and Impl finishes it when another session
// replaces it or the node stops; every call on it from Impl's side is made under Impl::mu_. Impl owns it once the
// call came: when it retires it tells Impl (forget), whose ticker destroys it.
class SessionStream final : public ServerCall {
public:
    // Asks gRPC for the next Attach.
    static void request(RemoteServer::Impl& owner);

    std::uint64_t id() const noexcept { return id_; }
    std::string peer() const { return context_.peer(); }
    std::chrono::milliseconds heartbeat() const noexcept { return heartbeat_; }
    std::chrono::steady_clock::time_point next_heartbeat{};
    std::string last_status;

    // Called by Impl::attach under Impl::mu_.
    void admit(std::uint64_t id, std::chrono::milliseconds heartbeat) noexcept {
        id_ = id;
        heartbeat_ = heartbeat;
    }
    grpc::ServerContext& context() noexcept { return context_; }

    // Queues an event; it is written after those before it.
    void push(pb::NodeEvent event);
    // Finishes the stream with `status` once the event being written is.
    void end(grpc::Status status);

private:
    explicit SessionStream(RemoteServer::Impl& owner) : ServerCall(owner), writer_(&context_) {}
    void proceed(Step step, bool ok) override;
    void retire() override;
    void write_next_locked();
    void finish_locked(grpc::Status status);

    pb::AttachRequest request_;
    grpc::ServerAsyncWriter<pb::NodeEvent> writer_;
    std::uint64_t id_ = 0; // 0 until Impl admits it
    std::chrono::milliseconds heartbeat_{0};
    std::deque<pb::NodeEvent> queue_;
    pb::NodeEvent current_;
    bool writing_ = false;
    bool finishing_ = false; // Finish is called or due once the write in progress is done
    bool finished_ = false;  // Finish is called
    bool over_ = false;      // DONE came: nothing more starts
    std::optional<grpc::Status> final_status_;
};

// The first requests of the calls whose classes live in remote_server_streams.cpp: Tasks, Read and Write.
void request_stream_calls(RemoteServer::Impl& owner);

class RemoteServer::Impl {
public:
    Impl(Supervisor& supervisor, const config::ServeConfig& serve, std::string node_name,
         std::shared_ptr<spdlog::logger> log)
        : supervisor_(supervisor), serve_(serve), name_(std::move(node_name)), log_(std::move(log)) {
        route_grpc_log(log_);
        keep_freed_memory_for_chunks();
        grpc::ServerBuilder builder;
        const std::string address = config::to_string(serve.listen);
        builder.AddListeningPort(address, server_credentials(serve.tls), &port_);
        builder.RegisterService(&service_);
        const int third = keepalive_interval_ms(serve.lost_after);
        builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, third);
        builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive_timeout_ms(serve.lost_after));
        builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
        builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
        builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 10);
        builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
        // A port another process listens on is an error here, not a share (gRPC sets SO_REUSEPORT by default).
        builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
        // The largest message an L4 sends is a module's image, or a chunk of a Write, and a head of a few bytes.
        builder.SetMaxReceiveMessageSize(
            static_cast<int>(std::max<std::size_t>(MAX_MODULE_IMAGE_BYTES, MAX_CHUNK_BYTES) + (1 << 20)));
        builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 4 << 20);
        builder.AddChannelArgument(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 8 << 20);
        builder.AddChannelArgument(GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, 8 << 20);
        cq_ = builder.AddCompletionQueue();
        server_ = builder.BuildAndStart();
        if (!server_ || port_ == 0) {
            throw std::runtime_error("cannot serve remote L4s on " + address +
                                     " (the address is in use, not local, or not an address)");
        }
        request_calls();
        cq_thread_ = std::thread([this] { serve_queue(); });
        log_->info("serving a remote L4 on {} ({}), peer name {}", address,
                   serve.tls.insecure ? "insecure plain TCP" : "mutual TLS",
                   serve.tls.insecure ? "unchecked" : serve.tls.peer_name);
        ticker_ = std::thread([this] { tick_loop(); });
    }

    Impl(const Impl&) = delete;
    Impl& operator=(const Impl&) = delete;
    ~Impl() { close(); }

    void stop() {
        {
            std::lock_guard lock(mu_);
            if (stopped_) {
                return;
            }
            stopped_ = true;
            for (auto& [id, stream] : streams_) {
                stream->end(grpc::Status(grpc::StatusCode::UNAVAILABLE, "node " + name_ + " is stopping"));
            }
        }
        tick_cv_.notify_all();
        if (ticker_.joinable()) {
            ticker_.join();
        }
        // The queue's thread and the worker serve the calls until the server has ended them all (those still open
        // after two seconds are cancelled). The queue stays open: a call whose work is still on the worker, or
        // waits for the Supervisor (a buffer created by a chip, a module load, a chip's copy), answers on it when
        // that work comes back, and a call started on a queue that has shut down and drained would abort the
        // process (gRPC asserts it).
        server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
        std::lock_guard lock(mu_);
        forget_done_locked();
    }

    // After stop() and once the Supervisor has stopped, so that nothing can come back to a call: the worker runs
    // what it still holds (refused, since the node is stopping), then the queue drains and each call retires.
    void close() {
        stop();
        {
            std::lock_guard lock(mu_);
            if (closed_) {
                return;
            }
            closed_ = true;
        }
        worker_.stop();
        cq_->Shutdown();
        cq_thread_.join();
        server_->Wait();
        std::lock_guard lock(mu_);
        forget_done_locked();
    }

    std::uint16_t port() const noexcept { return static_cast<std::uint16_t>(port_); }

    std::uint64_t session() const {
        std::lock_guard lock(mu_);
        return current_;
    }

    NodeService& service() noexcept { return service_; }
    grpc::ServerCompletionQueue* queue() noexcept { return cq_.get(); }

    // Runs `work` on the node's worker thread: what may take a while (creating or mapping a buffer, loading a module)
    // and must not hold up the queue's thread, which reads every call's messages. Work runs in the order it came.
    void offload(std::function<void()> work) { worker_.post(std::move(work)); }

    // Logs a call of `method` refused for its peer's certificate: at warning the first time a reason appears, at
    // debug while it repeats (an L4 retrying with a wrong certificate). Takes mu_.
    void refused_call(const char* method, const std::string& peer, const std::string& reason) {
        std::lock_guard lock(mu_);
        log_->log(reason == last_refusal_ ? spdlog::level::debug : spdlog::level::warn,
                  "refused a call of {} from {}: {}", method, peer, reason);
        last_refusal_ = reason;
    }

    // A new session from `stream`'s Attach: checked (the peer's name, the protocol, the L4's name), then made the
    // current one, which ends the one before; its stream starts with the hello and the node's tree. A session refused
    // is finished UNAUTHENTICATED with the reason, which the node logs. Takes ownership of `stream`.
    void attach(SessionStream* stream, const pb::AttachRequest& request) {
        grpc::ServerContext& context = stream->context();
        std::string refusal;
        if (const auto error = peer_name_error(*context.auth_context(), serve_.tls)) {
            refusal = *error;
        } else if (request.protocol() != REMOTE_PROTOCOL) {
            refusal = "the L4 speaks remote protocol " + std::to_string(request.protocol()) + ", this node " +
                      std::to_string(REMOTE_PROTOCOL);
        } else if (!config::is_node_name(request.l4_name())) {
            // Not quoted: the name goes to this node's log.
            refusal = "the L4 names itself with " + std::to_string(request.l4_name().size()) +
                      " bytes that are not a node name (1 to " + std::to_string(config::MAX_NAME_LENGTH) +
                      " of A-Z a-z 0-9 _ . -, not dots alone, not chipN or subN)";
        }
        const auto lost_after = serve_.lost_after;
        const auto heartbeat = std::chrono::milliseconds(
            request.heartbeat_ms() == 0 ? lost_after.count() / 4
                                        : std::clamp<std::int64_t>(request.heartbeat_ms(), 10, lost_after.count()));
        const std::string peer = context.peer();
        std::lock_guard lock(mu_);
        const std::uint64_t id = ++last_id_;
        stream->admit(id, heartbeat);
        streams_.emplace(id, std::unique_ptr<SessionStream>(stream));
        if (stopped_) {
            stream->end(grpc::Status(grpc::StatusCode::UNAVAILABLE, "node " + name_ + " is stopping"));
            return;
        }
        if (!refusal.empty()) {
            // An L4 that keeps trying with the same wrong certificate is reported once at warning.
            log_->log(refusal == last_refusal_ ? spdlog::level::debug : spdlog::level::warn,
                      "refused an L4 session from {}: {}", peer, refusal);
            last_refusal_ = refusal;
            stream->end(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, refusal));
            return;
        }
        if (current_ != 0) {
            const auto old = streams_.find(current_);
            if (old != streams_.end()) {
                log_->warn("L4 session {} from {} is replaced by session {} from {}", current_, old->second->peer(), id,
                           peer);
                old->second->end(grpc::Status(grpc::StatusCode::ABORTED,
                                              "replaced by L4 session " + std::to_string(id) + " from " + peer));
            }
        }
        current_ = id;
        log_->info("L4 {} attached from {}: session {}, heartbeat every {} ms", request.l4_name(), peer, id,
                   heartbeat.count());
        pb::NodeEvent hello;
        hello.mutable_hello()->set_name(name_);
        const auto& owner = supervisor_.owner_instance();
        hello.mutable_hello()->set_owner_instance(
            std::string(reinterpret_cast<const char*>(owner.data()), owner.size()));
        hello.mutable_hello()->set_session(id);
        hello.mutable_hello()->set_protocol(REMOTE_PROTOCOL);
        hello.mutable_hello()->set_pid(static_cast<std::uint32_t>(::getpid()));
        stream->push(std::move(hello));
        pb::NodeEvent tree;
        stream->last_status = workers_to_json(supervisor_.status());
        tree.set_status(stream->last_status);
        stream->push(std::move(tree));
        stream->next_heartbeat = std::chrono::steady_clock::now() + heartbeat;
    }

    // [range] of a buffer that `session` made, as this process maps it for a Read or a Write. Throws RequestError:
    // WORKER_DIED for a session that is not the current one, UNKNOWN_BUFFER for a buffer the session did not make,
    // STALE_BUFFER for one released meanwhile, BAD_REQUEST for a range past its end. The whole buffer is mapped
    // once, at its first transfer, and unmapped when it is released; `mapping` keeps the pages of a transfer in
    // progress valid whatever happens meanwhile.
    SessionBytes session_bytes(std::uint64_t session, const ByteRange& range) {
        const auto key = std::string(reinterpret_cast<const char*>(&range.buffer), sizeof range.buffer);
        std::shared_ptr<const HostWindow> mapping;
        {
            std::lock_guard lock(mu_);
            if (session == 0 || session != current_) {
                throw RequestError(ErrorCode::WORKER_DIED, "session " + std::to_string(session) +
                                                               " is not the node's current L4 session (" +
                                                               std::to_string(current_) + ")");
            }
            const auto it = session_buffers_.find(session);
            if (it == session_buffers_.end() ||
                std::find(it->second.begin(), it->second.end(), range.buffer) == it->second.end()) {
                throw RequestError(ErrorCode::UNKNOWN_BUFFER, "buffer " + to_string(range.buffer) +
                                                                  " is not a buffer of L4 session " +
                                                                  std::to_string(session));
            }
            if (const auto m = mapped_.find(key); m != mapped_.end()) {
                // A client of this node's own socket may release it (it has no owning uid here): the cached
                // mapping outlives the buffer then, and must not stand for it.
                if (supervisor_.registry().lookup(range.buffer) != BufferLookup::LIVE) {
                    mapped_.erase(m);
                    throw RequestError(ErrorCode::STALE_BUFFER,
                                       "buffer " + to_string(range.buffer) + " was released on node " + name_);
                }
                mapping = m->second;
            }
        }
        if (!mapping) {
            const auto info = supervisor_.registry().find(range.buffer);
            if (!info) {
                throw RequestError(ErrorCode::STALE_BUFFER, "buffer " + to_string(range.buffer) + " was released");
            }
            if (AddressSpace{info->descriptor.address_space} == AddressSpace::DEVICE) {
                check_range(range, info->descriptor.nbytes);
                SessionBytes device;
                device.length = range.length;
                device.device = *info;
                return device;
            }
            // Mapped without mu_ held: populating a large buffer's pages takes a while, and heartbeats go out under it.
            auto whole = std::make_shared<const HostWindow>(
                map_window(*info, supervisor_.registry(), 0, info->descriptor.nbytes, true));
            std::lock_guard lock(mu_);
            const auto it = session_buffers_.find(session);
            if (it != session_buffers_.end() &&
                std::find(it->second.begin(), it->second.end(), range.buffer) != it->second.end()) {
                mapping = mapped_.emplace(key, std::move(whole)).first->second;
            } else {
                mapping = std::move(whole); // released meanwhile: this transfer alone uses the pages
            }
        }
        check_range(range, mapping->length);
        SessionBytes out;
        out.data = mapping->data + range.offset;
        out.length = range.length;
        out.mapping = std::move(mapping);
        return out;
    }

    // Creates (POSIX_SHM, or in a chip's device memory) or releases a buffer for `session`, as `call` asks; the
    // reply's code and message say how it went. A buffer whose session ended while it was created is released at once.
    // Runs on the worker: reserving a large buffer's pages, or a chip's device memory, takes a while.
    void buffer_call(const pb::BufferCall& call, pb::BufferReply& reply) {
        const auto answer = [&](ErrorCode code, const std::string& message) {
            reply.set_code(static_cast<std::uint32_t>(code));
            reply.set_message(valid_utf8(message));
        };
        const std::uint64_t session = call.session();
        if (const std::string refusal = session_refusal(session); !refusal.empty()) {
            return answer(ErrorCode::WORKER_DIED, refusal);
        }
        try {
            const BufferCallRequest decoded = decode_buffer_call(call);
            if (decoded.create) {
                BufferRequest request;
                request.nbytes = decoded.nbytes;
                request.access = decoded.access;
                if (!decoded.chip.empty()) {
                    request.on = decoded.chip;
                    request.backend = chip_backend(decoded.chip);
                } else if (!decoded.world.empty()) {
                    request.world = decoded.world;
                    request.backend = chip_backend(decoded.world.front());
                }
                const BufferDescriptor d = supervisor_.create_buffer(request);
                bool kept = false;
                {
                    std::lock_guard lock(mu_);
                    if (session == current_ && !stopped_) {
                        session_buffers_[session].push_back(d.identity);
                        kept = true;
                    }
                }
                if (!kept) {
                    (void)supervisor_.release_buffer(d.identity);
                    return answer(ErrorCode::WORKER_DIED,
                                  "L4 session " + std::to_string(session) + " ended while its buffer was created");
                }
                log_->info("L4 session {}: created buffer {} ({} bytes)", session, to_string(d.identity), d.nbytes);
                reply.set_buffer_descriptor(std::string(reinterpret_cast<const char*>(&d), sizeof d));
                return answer(ErrorCode::OK, {});
            }
            {
                const CanonicalIdentity id = decoded.release;
                {
                    std::lock_guard lock(mu_);
                    auto& mine = session_buffers_[session];
                    const auto it = std::find(mine.begin(), mine.end(), id);
                    if (it == mine.end()) {
                        return answer(ErrorCode::UNKNOWN_BUFFER, "buffer " + to_string(id) +
                                                                     " is not a buffer of L4 session " +
                                                                     std::to_string(session));
                    }
                    mine.erase(it);
                    mapped_.erase(std::string(reinterpret_cast<const char*>(&id), sizeof id));
                }
                const auto warning = supervisor_.release_buffer(id);
                log_->info("L4 session {}: released buffer {}", session, to_string(id));
                return answer(ErrorCode::OK, warning.value_or(""));
            }
        } catch (const RequestError& e) {
            return answer(e.code(), e.what());
        } catch (const BufferCreateError& e) {
            return answer(ErrorCode::BAD_REQUEST, e.what());
        } catch (const WireError& e) {
            return answer(e.code(), e.what());
        } catch (const std::exception& e) {
            // A buffer table that is full (std::length_error), a buffer a local client released meanwhile: the call
            // gets the reason, and the node serves on.
            log_->warn("L4 session {}: buffer call refused: {}", session, e.what());
            return answer(ErrorCode::BAD_REQUEST, e.what());
        }
    }

    // The device memory of this node's chip `chip`: cuda_vmm on a cuda chip, sim_vmm on a sim chip. Throws
    // RequestError(BAD_REQUEST) naming the node's chips when `chip` is none of them.
    Backend chip_backend(const std::string& chip) const {
        std::string chips;
        for (const WorkerStatus& w : supervisor_.status()) {
            if (w.kind != "chip") {
                continue;
            }
            if (w.path == "/" + chip) {
                return w.backend == "cuda" ? Backend::CUDA_VMM : Backend::SIM_VMM;
            }
            chips += (chips.empty() ? "" : ", ") + w.path.substr(1);
        }
        throw RequestError(ErrorCode::BAD_REQUEST, "node " + name_ + " has no chip '" + chip +
                                                       "' (its chips: " + (chips.empty() ? "none" : chips) + ")");
    }

    // Why a task of `session` is not taken, or "" when that session is the current one.
    std::string session_refusal(std::uint64_t session) const {
        std::lock_guard lock(mu_);
        if (stopped_) {
            return "node " + name_ + " is stopping";
        }
        if (session != 0 && session == current_) {
            return {};
        }
        return "session " + std::to_string(session) + " is not the node's current L4 session (" +
               std::to_string(current_) + ")";
    }

    Supervisor& supervisor() noexcept { return supervisor_; }
    spdlog::logger& log() noexcept { return *log_; }

    // A new POSIX_SHM buffer of `length` bytes on this host, mapped, for the bytes of a device buffer.
    SessionBytes staging(std::uint64_t length) {
        BufferRequest request;
        request.nbytes = length;
        const BufferDescriptor d = supervisor_.create_buffer(request);
        SessionBytes out;
        out.keep = std::make_shared<const StagingBuffer>(supervisor_, d.identity);
        out.mapping = std::make_shared<const HostWindow>(
            map_window(*supervisor_.registry().find(d.identity), supervisor_.registry(), 0, length, true));
        out.data = out.mapping->data;
        out.length = length;
        out.staging = d;
        return out;
    }

    // Copies the staged bytes of `range` between device buffer `device` and `staged` on the chip that made it.
    void chip_copy(const BufferInfo& device, const SessionBytes& staged, std::uint64_t offset, bool to_device,
                   std::function<void(const TaskResult&)> done) {
        copy_through(supervisor_, device.creator, device.descriptor, staged.staging, offset, staged.length, to_device,
                     std::chrono::milliseconds(0), std::move(done));
    }

    // Takes back the tasks of `session` still queued here (their task group is the session).
    void withdraw_session_tasks(std::uint64_t session) {
        const std::size_t n = supervisor_.withdraw(session, "L4 session " + std::to_string(session) +
                                                                " ended before the task left the node's queue");
        if (n > 0) {
            log_->warn("L4 session {} ended: took back its {} queued tasks", session, n);
        }
    }
    const config::TlsConfig& tls() const noexcept { return serve_.tls; }

    // Called by a session's stream once it retired (possibly inside a call that holds mu_): the ticker destroys it.
    void forget(std::uint64_t id) {
        std::lock_guard lock(done_mu_);
        done_.push_back(id);
    }

private:
    // Posts the first request of each method; each call, once it came, requests the next of its kind.
    void request_calls();

    void serve_queue() {
        void* tag = nullptr;
        bool ok = false;
        while (next_event(*cq_, &tag, &ok)) {
            ServerCall::complete(tag, ok);
        }
    }

    void tick_loop() {
        std::unique_lock lock(mu_);
        while (!stopped_) {
            tick_cv_.wait_for(lock, remote_detail::TICK);
            forget_done_locked();
            if (stopped_ || current_ == 0) {
                continue;
            }
            const auto it = streams_.find(current_);
            if (it == streams_.end()) {
                continue;
            }
            SessionStream& stream = *it->second;
            const auto now = std::chrono::steady_clock::now();
            std::string tree = workers_to_json(supervisor_.status());
            if (tree != stream.last_status) {
                pb::NodeEvent event;
                event.set_status(tree);
                stream.last_status = std::move(tree);
                stream.push(std::move(event));
            }
            if (now >= stream.next_heartbeat) {
                pb::NodeEvent beat;
                beat.set_heartbeat_ns(remote_detail::monotonic_now_ns());
                stream.push(std::move(beat));
                stream.next_heartbeat = now + stream.heartbeat();
            }
        }
    }

    // The buffers a session made go with it: its L4 counts them lost once the session ended.
    void release_session_buffers_locked(std::uint64_t session) {
        const auto it = session_buffers_.find(session);
        if (it == session_buffers_.end()) {
            return;
        }
        for (const CanonicalIdentity& id : it->second) {
            mapped_.erase(std::string(reinterpret_cast<const char*>(&id), sizeof id));
            try {
                if (const auto warning = supervisor_.release_buffer(id)) {
                    log_->warn("L4 session {} ended: buffer {}: {}", session, to_string(id), *warning);
                }
            } catch (const std::exception& e) {
                log_->warn("L4 session {} ended: buffer {} could not be released: {}", session, to_string(id),
                           e.what());
            }
        }
        if (!it->second.empty()) {
            log_->info("L4 session {} ended: released its {} buffers", session, it->second.size());
        }
        session_buffers_.erase(it);
    }

    void forget_done_locked() {
        std::vector<std::uint64_t> done;
        {
            std::lock_guard lock(done_mu_);
            done.swap(done_);
        }
        for (const std::uint64_t id : done) {
            release_session_buffers_locked(id);
            if (current_ == id) {
                current_ = 0;
                if (!stopped_) {
                    log_->warn("L4 session {} ended: its stream closed (the L4 went away or the link was lost); "
                               "waiting for the next L4",
                               id);
                }
            }
            streams_.erase(id);
        }
    }

    Supervisor& supervisor_;
    const config::ServeConfig serve_;
    const std::string name_;
    std::shared_ptr<spdlog::logger> log_;
    int port_ = 0;
    NodeService service_;
    std::unique_ptr<grpc::ServerCompletionQueue> cq_;
    std::unique_ptr<grpc::Server> server_;
    std::thread cq_thread_;
    mutable std::mutex mu_;
    std::condition_variable tick_cv_;
    std::map<std::uint64_t, std::unique_ptr<SessionStream>> streams_;
    std::uint64_t current_ = 0;
    std::uint64_t last_id_ = 0;
    std::map<std::uint64_t, std::vector<CanonicalIdentity>> session_buffers_; // what each live session made
    std::map<std::string, std::shared_ptr<const HostWindow>> mapped_; // session buffers a transfer mapped, by identity
    std::string last_refusal_;
    bool stopped_ = false;
    bool closed_ = false;
    std::thread ticker_;
    std::mutex done_mu_; // a leaf lock: session streams that retired
    std::vector<std::uint64_t> done_;
    SerialWorker worker_; // what offload() runs
};

} // namespace canopy::daemon
