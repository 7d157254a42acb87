#include "daemon/remote_server_impl.h"
#include "ipc/unique_fd.h"

#include <cerrno>
#include <netdb.h>
#include <sys/socket.h>

namespace canopy::daemon {

ServerCall::ServerCall(RemoteServer::Impl& owner) : owner_(owner) {
    for (std::uint8_t i = 0; i < STEPS; ++i) {
        tags_[i] = Tag{this, static_cast<Step>(i)};
    }
}

void ServerCall::complete(void* tag, bool ok) {
    const Tag& t = *static_cast<const Tag*>(tag);
    {
        // Every operation starts under mu_: taking it orders what the thread that started it wrote before (a chunk's
        // range, a staged copy's bytes) before what proceed reads.
        std::lock_guard lock(t.call->mu_);
    }
    t.call->proceed(t.step, ok);
    t.call->release();
}

void ServerCall::release() {
    bool last = false;
    {
        std::lock_guard lock(mu_);
        last = --busy_ == 0;
    }
    if (last) {
        retire();
    }
}

void SessionStream::request(RemoteServer::Impl& owner) {
    auto* stream = new SessionStream(owner);
    stream->context_.AsyncNotifyWhenDone(stream->tag(DONE));
    owner.service().RequestAttach(&stream->context_, &stream->request_, &stream->writer_, owner.queue(), owner.queue(),
                                  stream->tag(REQUESTED));
}

void SessionStream::proceed(Step step, bool ok) {
    switch (step) {
    case REQUESTED:
        if (!ok) {
            return; // the server is shutting down: no call came, and none will
        }
        request(owner_);
        {
            std::lock_guard lock(mu_);
            hold(); // DONE
        }
        owner_.attach(this, request_);
        return;
    case WRITTEN: {
        std::lock_guard lock(mu_);
        writing_ = false;
        if (over_) {
            return;
        }
        if (!ok && !finishing_) {
            finishing_ = true;
            queue_.clear();
            final_status_ = grpc::Status(grpc::StatusCode::UNAVAILABLE, "the L4 stopped reading its session");
        }
        if (finishing_) {
            finish_locked(final_status_.value_or(grpc::Status::OK));
        } else if (!queue_.empty()) {
            write_next_locked();
        }
        return;
    }
    case DONE: {
        std::lock_guard lock(mu_);
        over_ = true;
        finishing_ = true;
        queue_.clear();
        return;
    }
    case READ:
    case FINISHED:
    case ALARM:
    case STEPS:
        return;
    }
}

void SessionStream::retire() {
    if (id_ == 0) {
        delete this; // never admitted: no call came
        return;
    }
    owner_.forget(id_);
}

void SessionStream::push(pb::NodeEvent event) {
    std::lock_guard lock(mu_);
    if (finishing_) {
        return;
    }
    queue_.push_back(std::move(event));
    if (!writing_) {
        write_next_locked();
    }
}

void SessionStream::end(grpc::Status status) {
    std::lock_guard lock(mu_);
    if (finishing_) {
        return;
    }
    finishing_ = true;
    queue_.clear();
    if (writing_) {
        final_status_ = std::move(status);
    } else {
        finish_locked(std::move(status));
    }
}

void SessionStream::write_next_locked() {
    current_ = std::move(queue_.front());
    queue_.pop_front();
    writing_ = true;
    hold();
    writer_.Write(current_, tag(WRITTEN));
}

void SessionStream::finish_locked(grpc::Status status) {
    if (finished_ || over_) {
        return;
    }
    finished_ = true;
    hold();
    writer_.Finish(status, tag(FINISHED));
}

namespace {

// The answer to a unary call of the session's: Echo, Buffer or Module. `Call` is the method's class, which
// constructs from the owner alone and names the method (Call::METHOD, for the log); `Request` is the call's message,
// `Reply` its answer's; `Requester` the service's Request method for it (NodeService::RequestEcho). The call's peer
// is checked first; Call::serve then fills the reply and calls finish() once, at once or from another thread later,
// after keep() (the call stays until then).
template <class Call, class Request, class Reply, auto Requester>
class UnaryCall : public ServerCall {
public:
    // Asks gRPC for the next call of this method. The call is whole before the request, since its completion may
    // come at once.
    static void request(RemoteServer::Impl& owner) {
        Call* call = new Call(owner);
        (owner.service().*Requester)(&call->context_, &call->request_, &call->responder_, owner.queue(), owner.queue(),
                                     call->tag(REQUESTED));
    }

protected:
    explicit UnaryCall(RemoteServer::Impl& owner) : ServerCall(owner), responder_(&context_) {}

    // Serves the call, whose peer is checked. The reply goes with finish().
    virtual void serve() = 0;

    // Sends reply_, status OK.
    void finish() {
        std::lock_guard lock(mu_);
        hold();
        responder_.Finish(reply_, grpc::Status::OK, tag(FINISHED));
    }

    Request request_;
    Reply reply_;

private:
    void proceed(Step step, bool ok) override {
        if (step != REQUESTED || !ok) {
            return;
        }
        request(owner_);
        if (const auto error = peer_name_error(*context_.auth_context(), owner_.tls())) {
            owner_.refused_call(Call::METHOD, context_.peer(), *error);
            std::lock_guard lock(mu_);
            hold();
            responder_.FinishWithError(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, *error), tag(FINISHED));
            return;
        }
        serve();
    }

    grpc::ServerAsyncResponseWriter<Reply> responder_;
};

// Echo: the call's id back at once, with code OK; nothing runs (health checks, benchmarks).
class EchoCall final : public UnaryCall<EchoCall, pb::TaskCall, pb::TaskReply, &NodeService::RequestEcho> {
public:
    static constexpr const char* METHOD = "Echo";
    explicit EchoCall(RemoteServer::Impl& owner) : UnaryCall(owner) {}

private:
    void serve() override {
        reply_.set_code(static_cast<std::uint32_t>(ErrorCode::OK));
        reply_.set_call_id(request_.call_id());
        finish();
    }
};

// Buffer: a buffer created or released for the session, on the node's worker (Impl::buffer_call).
class BufferCall final : public UnaryCall<BufferCall, pb::BufferCall, pb::BufferReply, &NodeService::RequestBuffer> {
public:
    static constexpr const char* METHOD = "Buffer";
    explicit BufferCall(RemoteServer::Impl& owner) : UnaryCall(owner) {}

private:
    void serve() override {
        keep();
        owner_.offload([this] {
            owner_.buffer_call(request_, reply_);
            finish();
            release();
        });
    }
};

// Module: a module of the L4's loaded into this node's cuda chips as a module load on its own socket would be (the
// name and image checked by ModuleService), or unloaded. The answer comes once every chip answered.
class ModuleCall final : public UnaryCall<ModuleCall, pb::ModuleCall, pb::ModuleReply, &NodeService::RequestModule> {
public:
    static constexpr const char* METHOD = "Module";
    explicit ModuleCall(RemoteServer::Impl& owner) : UnaryCall(owner) {}

private:
    void serve() override {
        keep();
        owner_.offload([this] { load(); });
    }

    // On the worker; the answer may come later, from the chips' replies.
    void load() {
        const std::uint64_t session = request_.session();
        const std::string& name = request_.name();
        const auto answer = [this](ErrorCode code, const std::string& message) {
            reply_.set_code(static_cast<std::uint32_t>(code));
            reply_.set_message(valid_utf8(message));
            finish();
            release();
        };
        if (const std::string refusal = owner_.session_refusal(session); !refusal.empty()) {
            return answer(ErrorCode::WORKER_DIED, refusal);
        }
        if (request_.unload()) {
            if (owner_.supervisor().unload_module(name)) {
                owner_.log().info("L4 session {}: unloaded module {}", session, name);
            }
            return answer(ErrorCode::OK, {});
        }
        const auto* p = reinterpret_cast<const std::byte*>(request_.image().data());
        try {
            owner_.supervisor().load_module_async(
                name, std::vector<std::byte>(p, p + request_.image().size()),
                [this, answer, session, name](ModuleLoadResult r) {
                    if (r.code == ErrorCode::OK) {
                        for (const std::string& chip : r.module.chips) {
                            reply_.add_chips(chip);
                        }
                        owner_.log().info("L4 session {}: loaded module {} ({} bytes) on {} chips", session, name,
                                          r.module.bytes, r.module.chips.size());
                    } else {
                        owner_.log().info("L4 session {}: module {} not loaded: {}", session, name, r.message);
                    }
                    answer(r.code, r.message);
                });
        } catch (const RequestError& e) {
            owner_.log().info("L4 session {}: module {} not loaded: {}", session, name, e.what());
            answer(e.code(), e.what());
        } catch (const std::exception& e) {
            owner_.log().warn("L4 session {}: module {} not loaded: {}", session, name, e.what());
            answer(ErrorCode::BAD_REQUEST, e.what());
        }
    }
};

} // namespace

void RemoteServer::Impl::request_calls() {
    SessionStream::request(*this);
    EchoCall::request(*this);
    BufferCall::request(*this);
    ModuleCall::request(*this);
    request_stream_calls(*this);
}

void RemoteServer::preflight(const config::ServeConfig& serve) {
    (void)server_credentials(serve.tls);
    const std::string address = config::to_string(serve.listen);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(serve.listen.port);
    if (const int rc = ::getaddrinfo(serve.listen.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
        throw std::runtime_error("cannot serve remote L4s on " + address + ": " + ::gai_strerror(rc));
    }
    std::string error;
    for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
        const ipc::UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
        const int one = 1;
        if (!fd || ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
            ::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 1) != 0) {
            error = std::strerror(errno);
            continue;
        }
        error.clear();
        break;
    }
    ::freeaddrinfo(found);
    if (!error.empty()) {
        throw std::runtime_error("cannot serve remote L4s on " + address + ": " + error);
    }
    if (!serve.tls.insecure) {
        // gRPC parses the certificate, the key and the CA only when a port takes them; on the real address a
        // refusal would read as the address's. A port of loopback, which always binds, tells them apart.
        grpc::ServerBuilder builder;
        int probe_port = 0;
        builder.AddListeningPort("127.0.0.1:0", server_credentials(serve.tls), &probe_port);
        const std::unique_ptr<grpc::ServerCompletionQueue> cq = builder.AddCompletionQueue(); // a server needs one
        const std::unique_ptr<grpc::Server> probe = builder.BuildAndStart();
        const bool refused = !probe || probe_port == 0;
        if (probe) {
            probe->Shutdown();
        }
        cq->Shutdown();
        void* tag = nullptr;
        bool ok = false;
        while (cq->Next(&tag, &ok)) {
        }
        if (refused) {
            throw std::runtime_error("cannot serve remote L4s with the certificate " + serve.tls.cert.string() +
                                     ", the private key " + serve.tls.key.string() + " and the CA certificate " +
                                     serve.tls.ca.string() +
                                     " (serve.tls): TLS refused them (a file that is not PEM, or a key that is not "
                                     "the certificate's; gRPC's log lines before this say more)");
        }
    }
}

RemoteServer::RemoteServer(Supervisor& supervisor, const config::ServeConfig& serve, std::string node_name,
                           std::shared_ptr<spdlog::logger> log)
    : impl_(std::make_unique<Impl>(supervisor, serve, std::move(node_name), std::move(log))) {}

RemoteServer::~RemoteServer() = default;

void RemoteServer::stop() {
    impl_->stop();
}

void RemoteServer::close() {
    impl_->close();
}

std::uint16_t RemoteServer::port() const noexcept {
    return impl_->port();
}

std::uint64_t RemoteServer::session() const {
    return impl_->session();
}

} // namespace canopy::daemon
