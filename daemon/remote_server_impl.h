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
#include "daemon/remote_call.h"
#include "daemon/remote_credentials.h"
#include "daemon/remote_server.h"
#include "daemon/staged_copy.h"
#include "remote/canopy_remote.grpc.pb.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
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

// One session's event stream. Every call on it from the server's side is made under Impl::mu_, and Impl
// forgets it in OnDone, so no call reaches it after it is destroyed; its own mutex orders writes with
// OnWriteDone, which gRPC calls on its threads.
class SessionStream final : public grpc::ServerWriteReactor<pb::NodeEvent> {
public:
    SessionStream(RemoteServer::Impl& owner, std::uint64_t id, std::string peer, std::chrono::milliseconds heartbeat)
        : owner_(owner), id_(id), peer_(std::move(peer)), heartbeat_(heartbeat) {}

    std::uint64_t id() const noexcept { return id_; }
    const std::string& peer() const noexcept { return peer_; }
    std::chrono::milliseconds heartbeat() const noexcept { return heartbeat_; }
    std::chrono::steady_clock::time_point next_heartbeat{};
    std::string last_status;

    void push(pb::NodeEvent event) {
        std::lock_guard lock(mu_);
        if (finishing_) {
            return;
        }
        queue_.push_back(std::move(event));
        if (!writing_) {
            write_next_locked();
        }
    }

    // Finishes the stream with `status` once the events queued before it are written.
    void end(grpc::Status status) {
        std::lock_guard lock(mu_);
        if (finishing_) {
            return;
        }
        finishing_ = true;
        queue_.clear();
        if (!writing_) {
            Finish(status);
        } else {
            final_status_ = std::move(status);
        }
    }

    void OnWriteDone(bool ok) override {
        std::lock_guard lock(mu_);
        writing_ = false;
        if (!ok && !finishing_) {
            finishing_ = true;
            queue_.clear();
            final_status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the L4 stopped reading its session");
        }
        if (finishing_) {
            Finish(final_status_.value_or(grpc::Status::OK));
            return;
        }
        if (!queue_.empty()) {
            write_next_locked();
        }
    }

    void OnCancel() override;
    void OnDone() override;

private:
    void write_next_locked() {
        current_ = std::move(queue_.front());
        queue_.erase(queue_.begin());
        writing_ = true;
        StartWrite(&current_);
    }

    RemoteServer::Impl& owner_;
    const std::uint64_t id_;
    const std::string peer_;
    const std::chrono::milliseconds heartbeat_;
    std::mutex mu_;
    std::vector<pb::NodeEvent> queue_;
    pb::NodeEvent current_;
    bool writing_ = false;
    bool finishing_ = false;
    std::optional<grpc::Status> final_status_;
};

// Read and Write are raw: their chunks are parsed and written in place (daemon/chunk_message.h).
class RemoteServer::Impl final
    : public pb::Node::WithRawCallbackMethod_Read<pb::Node::WithRawCallbackMethod_Write<pb::Node::CallbackService>> {
public:
    Impl(Supervisor& supervisor, const config::ServeConfig& serve, std::string node_name,
         std::shared_ptr<spdlog::logger> log)
        : supervisor_(supervisor), serve_(serve), name_(std::move(node_name)), log_(std::move(log)) {
        route_grpc_log(log_);
        keep_freed_memory_for_chunks();
        grpc::ServerBuilder builder;
        const std::string address = config::to_string(serve.listen);
        builder.AddListeningPort(address, server_credentials(serve.tls), &port_);
        builder.RegisterService(this);
        const int third = keepalive_interval_ms(serve.lost_after);
        builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIME_MS, third);
        builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, third);
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
        server_ = builder.BuildAndStart();
        if (!server_ || port_ == 0) {
            throw std::runtime_error("cannot serve remote L4s on " + address +
                                     " (the address is in use, not local, or not an address)");
        }
        log_->info("serving a remote L4 on {} ({}), peer name {}", address,
                   serve.tls.insecure ? "insecure plain TCP" : "mutual TLS",
                   serve.tls.insecure ? "unchecked" : serve.tls.peer_name);
        ticker_ = std::thread([this] { tick_loop(); });
    }

    ~Impl() override { stop(); }

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
        server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
        server_->Wait();
        std::lock_guard lock(mu_);
        forget_done_locked();
    }

    std::uint16_t port() const noexcept { return static_cast<std::uint16_t>(port_); }

    std::uint64_t session() const {
        std::lock_guard lock(mu_);
        return current_;
    }

    grpc::ServerWriteReactor<pb::NodeEvent>* Attach(grpc::CallbackServerContext* context,
                                                    const pb::AttachRequest* request) override {
        std::string refusal;
        if (const auto error = peer_name_error(*context->auth_context(), serve_.tls)) {
            refusal = *error;
        } else if (request->protocol() != REMOTE_PROTOCOL) {
            refusal = "the L4 speaks remote protocol " + std::to_string(request->protocol()) + ", this node " +
                      std::to_string(REMOTE_PROTOCOL);
        } else if (!config::is_node_name(request->l4_name())) {
            // Not quoted: the name goes to this node's log.
            refusal = "the L4 names itself with " + std::to_string(request->l4_name().size()) +
                      " bytes that are not a node name (1 to " + std::to_string(config::MAX_NAME_LENGTH) +
                      " of A-Z a-z 0-9 _ . -, not dots alone, not chipN or subN)";
        }
        const auto lost_after = serve_.lost_after;
        const auto heartbeat = std::chrono::milliseconds(
            request->heartbeat_ms() == 0 ? lost_after.count() / 4
                                         : std::clamp<std::int64_t>(request->heartbeat_ms(), 10, lost_after.count()));
        std::lock_guard lock(mu_);
        const std::uint64_t id = ++last_id_;
        auto stream = std::make_unique<SessionStream>(*this, id, context->peer(), heartbeat);
        SessionStream* raw = stream.get();
        streams_.emplace(id, std::move(stream));
        if (stopped_) {
            raw->end(grpc::Status(grpc::StatusCode::UNAVAILABLE, "node " + name_ + " is stopping"));
            return raw;
        }
        if (!refusal.empty()) {
            // An L4 that keeps trying with the same wrong certificate is reported once at warning.
            log_->log(refusal == last_refusal_ ? spdlog::level::debug : spdlog::level::warn,
                      "refused an L4 session from {}: {}", context->peer(), refusal);
            last_refusal_ = refusal;
            raw->end(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, refusal));
            return raw;
        }
        if (current_ != 0) {
            const auto old = streams_.find(current_);
            if (old != streams_.end()) {
                log_->warn("L4 session {} from {} is replaced by session {} from {}", current_, old->second->peer(), id,
                           context->peer());
                old->second->end(
                    grpc::Status(grpc::StatusCode::ABORTED,
                                 "replaced by L4 session " + std::to_string(id) + " from " + context->peer()));
            }
        }
        current_ = id;
        log_->info("L4 {} attached from {}: session {}, heartbeat every {} ms", request->l4_name(), context->peer(), id,
                   heartbeat.count());
        pb::NodeEvent hello;
        hello.mutable_hello()->set_name(name_);
        const auto& owner = supervisor_.owner_instance();
        hello.mutable_hello()->set_owner_instance(
            std::string(reinterpret_cast<const char*>(owner.data()), owner.size()));
        hello.mutable_hello()->set_session(id);
        hello.mutable_hello()->set_protocol(REMOTE_PROTOCOL);
        hello.mutable_hello()->set_pid(static_cast<std::uint32_t>(::getpid()));
        raw->push(std::move(hello));
        pb::NodeEvent tree;
        raw->last_status = workers_to_json(supervisor_.status());
        tree.set_status(raw->last_status);
        raw->push(std::move(tree));
        raw->next_heartbeat = std::chrono::steady_clock::now() + heartbeat;
        return raw;
    }

    grpc::ServerBidiReactor<pb::TaskCalls, pb::TaskReplies>* Tasks(grpc::CallbackServerContext* context) override;
    grpc::ServerWriteReactor<grpc::ByteBuffer>* Read(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* call) override;
    grpc::ServerReadReactor<grpc::ByteBuffer>* Write(grpc::CallbackServerContext* context,
                                                     grpc::ByteBuffer* reply) override;

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

    grpc::ServerUnaryReactor* Echo(grpc::CallbackServerContext* context, const pb::TaskCall* call,
                                   pb::TaskReply* reply) override {
        grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
        if (const auto error = peer_name_error(*context->auth_context(), serve_.tls)) {
            reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, *error));
            return reactor;
        }
        reply->set_code(static_cast<std::uint32_t>(ErrorCode::OK));
        reply->set_call_id(call->call_id());
        reactor->Finish(grpc::Status::OK);
        return reactor;
    }

    // Creates (POSIX_SHM, or in a chip's device memory) or releases a buffer for the current session. The creation runs
    // without mu_ held (reserving a large buffer's pages takes a while, and heartbeats go out under mu_); a buffer
    // whose session ended meanwhile is released at once.
    // A module of the L4's, loaded into this node's cuda chips as a module load on its own socket would be (the
    // name and image checked by ModuleService), or unloaded. The answer comes once every chip answered.
    grpc::ServerUnaryReactor* Module(grpc::CallbackServerContext* context, const pb::ModuleCall* call,
                                     pb::ModuleReply* reply) override {
        grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
        if (const auto error = peer_name_error(*context->auth_context(), serve_.tls)) {
            reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, *error));
            return reactor;
        }
        const auto answer = [reactor, reply](ErrorCode code, const std::string& message) {
            reply->set_code(static_cast<std::uint32_t>(code));
            reply->set_message(message);
            reactor->Finish(grpc::Status::OK);
        };
        const std::uint64_t session = call->session();
        if (const std::string refusal = session_refusal(session); !refusal.empty()) {
            answer(ErrorCode::WORKER_DIED, refusal);
            return reactor;
        }
        const std::string name = call->name();
        if (call->unload()) {
            const bool had = supervisor_.unload_module(name);
            if (had) {
                log_->info("L4 session {}: unloaded module {}", session, name);
            }
            answer(ErrorCode::OK, {});
            return reactor;
        }
        const auto* p = reinterpret_cast<const std::byte*>(call->image().data());
        try {
            supervisor_.load_module_async(name, std::vector<std::byte>(p, p + call->image().size()),
                                          [answer, reply, session, name, log = log_](ModuleLoadResult r) {
                                              if (r.code == ErrorCode::OK) {
                                                  for (const std::string& chip : r.module.chips) {
                                                      reply->add_chips(chip);
                                                  }
                                                  log->info("L4 session {}: loaded module {} ({} bytes) on {} chips",
                                                            session, name, r.module.bytes, r.module.chips.size());
                                              } else {
                                                  log->info("L4 session {}: module {} not loaded: {}", session, name,
                                                            r.message);
                                              }
                                              answer(r.code, r.message);
                                          });
        } catch (const RequestError& e) {
            log_->info("L4 session {}: module {} not loaded: {}", session, name, e.what());
            answer(e.code(), e.what());
        }
        return reactor;
    }

    grpc::ServerUnaryReactor* Buffer(grpc::CallbackServerContext* context, const pb::BufferCall* call,
                                     pb::BufferReply* reply) override {
        grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
        if (const auto error = peer_name_error(*context->auth_context(), serve_.tls)) {
            reactor->Finish(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, *error));
            return reactor;
        }
        const auto answer = [&](ErrorCode code, const std::string& message) {
            reply->set_code(static_cast<std::uint32_t>(code));
            reply->set_message(message);
            reactor->Finish(grpc::Status::OK);
            return reactor;
        };
        const std::uint64_t session = call->session();
        if (const std::string refusal = session_refusal(session); !refusal.empty()) {
            return answer(ErrorCode::WORKER_DIED, refusal);
        }
        try {
            const BufferCallRequest decoded = decode_buffer_call(*call);
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
                    if (session == current_) {
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
                reply->set_buffer_descriptor(std::string(reinterpret_cast<const char*>(&d), sizeof d));
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
        if (session != 0 && session == current_) {
            return {};
        }
        return "session " + std::to_string(session) + " is not the node's current L4 session (" +
               std::to_string(current_) + ")";
    }

    Supervisor& supervisor() noexcept { return supervisor_; }

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

    // Called by a stream when gRPC is done with it (possibly inside a call that holds mu_): the ticker forgets it.
    void forget(std::uint64_t id) {
        std::lock_guard lock(done_mu_);
        done_.push_back(id);
    }

private:
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
    std::unique_ptr<grpc::Server> server_;
    mutable std::mutex mu_;
    std::condition_variable tick_cv_;
    std::map<std::uint64_t, std::unique_ptr<SessionStream>> streams_;
    std::uint64_t current_ = 0;
    std::uint64_t last_id_ = 0;
    std::map<std::uint64_t, std::vector<CanonicalIdentity>> session_buffers_; // what each live session made
    std::map<std::string, std::shared_ptr<const HostWindow>> mapped_; // session buffers a transfer mapped, by identity
    std::string last_refusal_;
    bool stopped_ = false;
    std::thread ticker_;
    std::mutex done_mu_; // a leaf lock: streams gRPC is done with
    std::vector<std::uint64_t> done_;
};

} // namespace canopy::daemon
