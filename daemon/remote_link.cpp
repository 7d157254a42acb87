#include "daemon/remote_link.h"

#include "daemon/chunk_message.h"
#include "daemon/host_window.h"
#include "daemon/json_codec.h"
#include "daemon/remote_call.h"
#include "daemon/remote_credentials.h"
#include "daemon/remote_server.h"
#include "daemon/remote_session_streams.h"
#include "daemon/supervisor.h"
#include "ipc/child_message.h"
#include "ipc/cpus.h"
#include "ipc/fd_passing.h"
#include "ipc/mailbox_child.h"
#include "protocol/module_launch.h"
#include "remote/canopy_remote.grpc.pb.h"
#include "worker/kernels/kernel_error.h"
#include "worker/worker_loop.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/rpc_method.h>
#include <map>
#include <mutex>
#include <optional>
#include <set>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace canopy::daemon {
namespace pb = canopy::remote::v1;
namespace {

// How long a node may take to load a module into all its chips: each chip's driver JIT-compiles PTX, which for
// a large module takes seconds.
constexpr std::chrono::minutes MODULE_TIMEOUT{5};

// A Module call of the link's, alive until its answer came.
struct ModuleCallState {
    grpc::ClientContext context;
    pb::ModuleCall request;
    pb::ModuleReply reply;
};

class RemoteLink final : public worker::FrameRunner {
public:
    RemoteLink(std::string l4_name, std::string path, const config::RemoteConfig& remote, ipc::UniqueFd mailbox,
               ipc::UniqueFd control, std::uint32_t generation)
        : l4_name_(std::move(l4_name)), path_(std::move(path)), remote_(remote), control_(std::move(control)),
          mailbox_(mailbox.get(), generation), host_(remote_host_name(path_, remote)) {}

    ~RemoteLink() override {
        stopping_ = true;
        // Ends read_control, and a status report to the parent that the streams' thread may be blocked in.
        ::shutdown(control_.get(), SHUT_RDWR);
        streams_.reset(); // cancels the session's streams and waits for their ends, which call into this link
        {
            // A module call's answer publishes into the mailbox from a gRPC thread: each is cancelled, and its
            // answer waited for, while the mailbox is mapped. Cancelled outside the lock, which the answer takes.
            std::vector<std::shared_ptr<ModuleCallState>> in_flight;
            {
                std::lock_guard lock(modules_mu_);
                in_flight.assign(modules_.begin(), modules_.end());
            }
            for (const auto& call : in_flight) {
                call->context.TryCancel();
            }
            std::unique_lock lock(modules_mu_);
            modules_cv_.wait(lock, [&] { return modules_.empty(); });
        }
        {
            std::lock_guard lock(mu_);
            cv_.notify_all();
        }
        {
            std::lock_guard lock(transfer_mu_);
            if (transfer_context_ != nullptr) {
                transfer_context_->TryCancel();
            }
            transfer_cv_.notify_all();
        }
        for (std::thread* t : {&watchdog_, &control_reader_, &transfer_thread_}) {
            if (t->joinable()) {
                t->join();
            }
        }
    }

    int serve() {
        route_grpc_log(nullptr); // every failure reaches the supervisor's log as the reason the host was lost
        keep_freed_memory_for_chunks();
        try {
            channel_ = grpc::CreateCustomChannel(config::to_string(remote_.address), channel_credentials(remote_.tls),
                                                 channel_arguments(remote_));
        } catch (const std::exception& e) {
            worker::send_fatal(control_.get(), "remote node " + path_ + ": " + e.what());
            return worker::FATAL_EXIT_CODE;
        }
        stub_ = pb::Node::NewStub(channel_);
        // Read and Write move raw messages: chunks parsed and sent in place (daemon/chunk_message.h).
        static const std::string read_name = "/" + std::string(pb::Node::service_full_name()) + "/Read";
        static const std::string write_name = "/" + std::string(pb::Node::service_full_name()) + "/Write";
        read_method_.emplace(read_name.c_str(), grpc::internal::RpcMethod::SERVER_STREAMING, channel_);
        write_method_.emplace(write_name.c_str(), grpc::internal::RpcMethod::CLIENT_STREAMING, channel_);
        pb::AttachRequest request;
        request.set_l4_name(l4_name_);
        request.set_protocol(REMOTE_PROTOCOL);
        request.set_heartbeat_ms(
            static_cast<std::uint32_t>(std::max<std::int64_t>(remote_.lost_after.count() / 4, 10)));
        heard(); // the watchdog counts from here
        watchdog_ = std::thread([this] { watch(); });
        streams_ = std::make_unique<SessionStreams>(
            *stub_, request, [this](const pb::NodeEvent& event) { on_event(event); },
            [this](const std::string& which, const grpc::Status& status) {
                if (!stopping_) {
                    lost(session_ == 0 ? "no session could be opened (" + describe_status(status) + ")"
                                       : "its " + which + " ended (" + describe_status(status) + ")");
                }
            });
        {
            std::unique_lock lock(mu_);
            cv_.wait(lock, [&] { return session_ != 0 || stopping_; });
        }
        if (stopping_) {
            return 0;
        }
        control_reader_ = std::thread([this] { read_control(); });
        // The L4 sends the session's tasks on a Tasks stream of its own (daemon/remote_tasks.h).
        worker::send_ready(control_.get(), std::to_string(session_));
        return worker::serve_frames(mailbox_, *this);
    }

protected:
    // Drops the mapping a copy across hosts made of a buffer of this host.
    void release(const CanonicalIdentity& id) override {
        std::lock_guard lock(transfer_mu_);
        mapped_.erase(std::string(reinterpret_cast<const char*>(&id), sizeof id));
    }

    void create_vmm(const worker::VmmCreate& /*request*/) override {
        throw kernels::KernelError(ErrorCode::BAD_REQUEST,
                                   "device buffers of remote node " + path_ + " are created on its host");
    }

    // @remote_buffer_create (scalars: bytes, access) and @remote_buffer_release (one tensor naming the buffer): a
    // Buffer call to the node for this session. A creation's frame completes with the descriptor the node made,
    // in hex (remote_buffer_hex), which the supervisor validates before it registers the buffer.
    bool run_control(std::string_view kernel) override {
        if (kernel.starts_with(MODULE_LOAD_FRAME) || kernel.starts_with(MODULE_UNLOAD_FRAME)) {
            forward_module(kernel);
            return true;
        }
        const bool create = kernel == REMOTE_BUFFER_CREATE;
        if (!create && kernel != REMOTE_BUFFER_RELEASE) {
            return false;
        }
        pb::BufferCall call;
        call.set_session(session_);
        if (create) {
            if (args_.scalars.size() < 2 || args_.scalars.size() > 3 || !args_.tensors.empty()) {
                throw kernels::KernelError(ErrorCode::BAD_REQUEST,
                                           std::string(kernel) + ": expected bytes, access and a world flag");
            }
            call.set_create_bytes(static_cast<std::uint64_t>(args_.scalars[0].bits));
            call.set_access(static_cast<std::uint32_t>(args_.scalars[1].bits));
            if (args_.scalars.size() == 3 && args_.scalars[2].bits == 1) {
                // A symmetric buffer: the target lists its world, comma-separated.
                std::string_view rest = frame().target;
                while (!rest.empty()) {
                    const auto comma = rest.find(',');
                    call.add_world(std::string(rest.substr(0, comma)));
                    rest = comma == std::string_view::npos ? std::string_view{} : rest.substr(comma + 1);
                }
            } else {
                call.set_chip(std::string(frame().target));
            }
        } else {
            if (args_.tensors.size() != 1 || !args_.scalars.empty()) {
                throw kernels::KernelError(ErrorCode::BAD_REQUEST, std::string(kernel) + ": expected one tensor");
            }
            const CanonicalIdentity& id = args_.tensors[0].tensor.buffer.identity;
            call.set_release(std::string(reinterpret_cast<const char*>(&id), sizeof id));
        }
        grpc::ClientContext context;
        context.set_deadline(std::chrono::system_clock::now() + CREATE_TIMEOUT);
        pb::BufferReply reply;
        const grpc::Status status = stub_->Buffer(&context, call, &reply);
        if (!status.ok()) {
            throw kernels::KernelError(ErrorCode::WORKER_DIED, host_ + " did not answer: " + describe_status(status));
        }
        if (reply.code() > ERROR_CODE_MAX) {
            throw kernels::KernelError(ErrorCode::KERNEL_FAILED,
                                       host_ + " answered with unknown error code " + std::to_string(reply.code()));
        }
        if (reply.code() != static_cast<std::uint32_t>(ErrorCode::OK)) {
            throw kernels::KernelError(static_cast<ErrorCode>(reply.code()), host_ + ": " + reply.message());
        }
        std::string message = reply.message();
        if (create) {
            if (reply.buffer_descriptor().size() != sizeof(BufferDescriptor)) {
                throw kernels::KernelError(ErrorCode::INVALID_DESCRIPTOR,
                                           host_ + " answered a buffer creation with " +
                                               std::to_string(reply.buffer_descriptor().size()) + " descriptor bytes");
            }
            message = remote_buffer_hex(reply.buffer_descriptor());
        }
        const worker::FrameDone done = defer();
        done(ErrorCode::OK, message, 0, 0);
        return true;
    }

    // @module_load:NAME (one uint8[n] tensor over the image, in a POSIX shm buffer of this host) and
    // @module_unload:NAME: a Module call to the node, whose answer finishes the frame. A load's message is the
    // chips that loaded it, named from this level ("/hb/chip0"), space-separated, as a nested supervisor answers;
    // a node without a live cuda chip loads nothing and answers none.
    void forward_module(std::string_view kernel) {
        const bool unload = kernel.starts_with(MODULE_UNLOAD_FRAME);
        auto call = std::make_shared<ModuleCallState>();
        call->request.set_session(session_);
        call->request.set_name(std::string(kernel.substr(kernel.find(':') + 1)));
        call->request.set_unload(unload);
        if (!unload) {
            if (args_.tensors.size() != 1 || !args_.scalars.empty() ||
                args_.tensors[0].tensor.dtype != DataType::UINT8 || args_.tensors[0].tensor.ndims != 1 ||
                args_.tensors[0].tensor.strides[0] != 1 ||
                Backend{args_.tensors[0].tensor.buffer.backend} != Backend::POSIX_SHM) {
                throw WireError(ErrorCode::BAD_REQUEST, "args",
                                std::string(kernel) + " expects one uint8[n] tensor over a POSIX shm image");
            }
            const Tensor& view = args_.tensors[0].tensor;
            const HostWindow image = map_shm_window(view.buffer, view.byte_offset, view.shapes[0], false);
            call->request.set_image(reinterpret_cast<const char*>(image.data), view.shapes[0]);
        }
        call->context.set_deadline(std::chrono::system_clock::now() + MODULE_TIMEOUT);
        {
            std::lock_guard lock(modules_mu_);
            modules_.insert(call);
        }
        const worker::FrameDone done = defer();
        stub_->async()->Module(&call->context, &call->request, &call->reply,
                               [this, call, done, unload, host = host_, path = path_](const grpc::Status& status) {
                                   done(module_outcome(status, call->reply, unload, host, path));
                                   std::lock_guard lock(modules_mu_);
                                   modules_.erase(call);
                                   modules_cv_.notify_all();
                               });
    }

    static worker::TaskOutcome module_outcome(const grpc::Status& status, const pb::ModuleReply& reply, bool unload,
                                              const std::string& host, const std::string& path) {
        if (!status.ok()) {
            return {ErrorCode::WORKER_DIED, host + " did not answer the module call: " + describe_status(status)};
        }
        if (reply.code() > ERROR_CODE_MAX) {
            return {ErrorCode::KERNEL_FAILED,
                    host + " answered with unknown error code " + std::to_string(reply.code())};
        }
        const auto code = static_cast<ErrorCode>(reply.code());
        if (unload || code == ErrorCode::NO_CONSUMER) {
            return {ErrorCode::OK, {}}; // an unload, or a host without a live cuda chip: nothing loaded there
        }
        if (code != ErrorCode::OK) {
            return {code, host + ": " + reply.message()};
        }
        std::string chips;
        for (const std::string& chip : reply.chips()) {
            if (!chip.starts_with("/chip") || !is_level3_worker_path(chip)) {
                return {ErrorCode::KERNEL_FAILED,
                        host + " named a chip " + quoted_start(chip) + " that is not one of a level-3 node's (/chipN)"};
            }
            chips += (chips.empty() ? "" : " ") + path + chip;
        }
        return {ErrorCode::OK, chips};
    }

    void bind() override {} // the node's own workers map what the task names, on its host

    // The link runs copies across hosts alone: the session's tasks go out on the L4's own Tasks stream
    // (daemon/remote_tasks.h).
    void execute(std::string_view kernel, const LaunchConfig& /*launch*/) override {
        if (kernel == "copy" && crosses_hosts()) {
            queue_transfer();
            return;
        }
        throw kernels::KernelError(ErrorCode::BAD_REQUEST, "the link of remote node " + path_ + " was sent task '" +
                                                               std::string(kernel) +
                                                               "', which goes out on its L4's task stream");
    }

private:
    // One copy between a POSIX_SHM buffer of this host and a buffer of the node's, run on the transfer thread.
    struct Transfer {
        bool pull = false; // node to this host (a Read); else this host to the node (a Write)
        BufferDescriptor local{};
        std::uint64_t local_offset = 0;
        CanonicalIdentity remote{};
        std::uint64_t remote_offset = 0;
        std::uint64_t bytes = 0;
        std::uint32_t timeout_ms = 0;
        std::optional<worker::FrameDone> done;
    };

    bool on_node(const BufferDescriptor& d) const noexcept { return d.identity.owner_instance == node_owner_; }

    bool crosses_hosts() const noexcept {
        return std::any_of(args_.tensors.begin(), args_.tensors.end(),
                           [&](const TensorArg& a) { return !on_node(a.tensor.buffer); });
    }

    // A copy whose one side is a buffer of this host: checked here, its bytes moved by the transfer thread.
    void queue_transfer() {
        if (args_.tensors.size() != 2) {
            throw kernels::KernelError(ErrorCode::BAD_REQUEST, "copy: expected two tensors");
        }
        const Tensor& in = args_.tensors[0].tensor;
        const Tensor& out = args_.tensors[1].tensor;
        const bool pull = on_node(in.buffer);
        if (pull == on_node(out.buffer)) {
            throw kernels::KernelError(ErrorCode::UNREACHABLE_BUFFER,
                                       "copy: neither buffer is on " + host_ + ", so " + path_ + " cannot run it");
        }
        const Tensor& local = pull ? out : in;
        if (Backend{local.buffer.backend} != Backend::POSIX_SHM) {
            throw kernels::KernelError(ErrorCode::UNREACHABLE_BUFFER,
                                       "copy across hosts: args[" + std::string(pull ? "1" : "0") + "] is a " +
                                           to_string(Backend{local.buffer.backend}) + " buffer; a copy to or from " +
                                           host_ + " reaches posix_shm buffers of this host");
        }
        if (!tensor_is_contiguous(in) || !tensor_is_contiguous(out) || in.dtype != out.dtype ||
            tensor_element_count(in) != tensor_element_count(out)) {
            throw kernels::KernelError(ErrorCode::BAD_REQUEST, "copy across hosts: both views must be contiguous, "
                                                               "of one dtype and of one element count");
        }
        Transfer t;
        t.pull = pull;
        t.local = local.buffer;
        t.local_offset = local.byte_offset;
        const Tensor& remote = pull ? in : out;
        t.remote = remote.buffer.identity;
        t.remote_offset = remote.byte_offset;
        t.bytes = tensor_extent_bytes(in);
        t.timeout_ms = frame().timeout_ms;
        std::lock_guard lock(transfer_mu_);
        if (!transfer_thread_.joinable()) {
            transfer_thread_ = std::thread([this] { transfer_loop(); });
        }
        // Deferred only now, after all that can throw (a thread that cannot start): a frame failed by a throw
        // is answered by the frame loop, one deferred only by its done.
        t.done.emplace(defer());
        transfers_.push_back(std::move(t));
        transfer_cv_.notify_one();
    }

    void transfer_loop() {
        std::unique_lock lock(transfer_mu_);
        for (;;) {
            transfer_cv_.wait(lock, [&] { return stopping_ || !transfers_.empty(); });
            if (stopping_) {
                return;
            }
            Transfer t = std::move(transfers_.front());
            transfers_.pop_front();
            lock.unlock();
            const std::uint64_t start = worker::monotonic_ns();
            const auto [code, message] = move_bytes(t);
            (*t.done)(code, message, start, worker::monotonic_ns());
            lock.lock();
        }
    }

    // The whole of buffer `d` of this host, mapped at its first copy across hosts and kept until its release.
    std::shared_ptr<const HostWindow> local_mapping(const BufferDescriptor& d) {
        const auto key = std::string(reinterpret_cast<const char*>(&d.identity), sizeof d.identity);
        {
            std::lock_guard lock(transfer_mu_);
            if (const auto it = mapped_.find(key); it != mapped_.end()) {
                return it->second;
            }
        }
        auto mapping = std::make_shared<const HostWindow>(map_shm_window(d, 0, d.nbytes, true));
        std::lock_guard lock(transfer_mu_);
        return mapped_.emplace(key, std::move(mapping)).first->second;
    }

    // Moves the bytes of `t` over one Read or Write stream of the session, in chunks of MAX_CHUNK_BYTES.
    std::pair<ErrorCode, std::string> move_bytes(const Transfer& t) {
        std::shared_ptr<const HostWindow> mapping;
        try {
            mapping = local_mapping(t.local);
        } catch (const std::exception& e) {
            return {ErrorCode::UNREACHABLE_BUFFER, "copy across hosts: buffer " + to_string(t.local.identity) +
                                                       " of this host cannot be mapped: " + e.what()};
        }
        std::byte* const base = mapping->data + t.local_offset;
        grpc::ClientContext context;
        if (t.timeout_ms != 0) {
            context.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(t.timeout_ms));
        }
        {
            std::lock_guard lock(transfer_mu_);
            if (stopping_) {
                return {ErrorCode::WORKER_DIED, "the link to " + host_ + " is stopping"};
            }
            transfer_context_ = &context;
        }
        struct Forget {
            RemoteLink& link;
            ~Forget() {
                std::lock_guard lock(link.transfer_mu_);
                link.transfer_context_ = nullptr;
            }
        } forget{*this};
        const std::string remote(reinterpret_cast<const char*>(&t.remote), sizeof t.remote);
        const auto failed = [&](const grpc::Status& status) -> std::pair<ErrorCode, std::string> {
            if (status.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED) {
                return {ErrorCode::TIMEOUT, "copy across hosts: " + std::to_string(t.bytes) + " bytes to or from " +
                                                host_ + " took longer than " + std::to_string(t.timeout_ms) + " ms"};
            }
            return {ErrorCode::WORKER_DIED, host_ + " did not complete the copy: " + describe_status(status)};
        };
        const auto node_code = [&](std::uint32_t code,
                                   const std::string& message) -> std::pair<ErrorCode, std::string> {
            if (code > ERROR_CODE_MAX) {
                return {ErrorCode::KERNEL_FAILED, host_ + " answered with unknown error code " + std::to_string(code)};
            }
            return {static_cast<ErrorCode>(code), host_ + ": " + message};
        };
        if (t.pull) {
            pb::ReadCall call;
            call.set_session(session_);
            call.set_buffer(remote);
            call.set_offset(t.remote_offset);
            call.set_length(t.bytes);
            const std::unique_ptr<grpc::ClientReader<grpc::ByteBuffer>> reader(
                grpc::internal::ClientReaderFactory<grpc::ByteBuffer>::Create(channel_.get(), *read_method_, &context,
                                                                              call));
            grpc::ByteBuffer message;
            std::uint64_t got = 0;
            std::optional<std::pair<ErrorCode, std::string>> refusal;
            while (reader->Read(&message)) {
                try {
                    const ChunkLayout chunk = scan_chunk(message, "read");
                    if (chunk.code != 0) {
                        refusal = node_code(chunk.code, chunk.message);
                        break;
                    }
                    if (chunk.data_size > t.bytes - got) {
                        refusal = {ErrorCode::KERNEL_FAILED,
                                   host_ + " sent more than the " + std::to_string(t.bytes) + " bytes asked for"};
                        break;
                    }
                    copy_chunk_data(message, chunk, base + got);
                    got += chunk.data_size;
                } catch (const RequestError& e) {
                    refusal = {ErrorCode::KERNEL_FAILED, host_ + " sent a chunk this host cannot read: " + e.what()};
                    break;
                }
            }
            if (refusal) {
                context.TryCancel();
            }
            const grpc::Status status = reader->Finish();
            if (refusal) {
                return *refusal;
            }
            if (!status.ok()) {
                return failed(status);
            }
            if (got != t.bytes) {
                return {ErrorCode::KERNEL_FAILED,
                        host_ + " sent " + std::to_string(got) + " of " + std::to_string(t.bytes) + " bytes"};
            }
            return {ErrorCode::OK, {}};
        }
        pb::BufferReply reply;
        const std::unique_ptr<grpc::ClientWriter<grpc::ByteBuffer>> writer(
            grpc::internal::ClientWriterFactory<grpc::ByteBuffer>::Create(channel_.get(), *write_method_, &context,
                                                                          &reply));
        pb::Chunk head; // the first chunk alone names the range
        head.set_session(session_);
        head.set_buffer(remote);
        head.set_offset(t.remote_offset);
        head.set_length(t.bytes);
        for (std::uint64_t at = 0; at < t.bytes;) {
            const std::uint64_t n = std::min(MAX_CHUNK_BYTES, t.bytes - at);
            if (!writer->Write(chunk_message(at == 0 ? head : pb::Chunk{}, base + at, n, mapping))) {
                break; // the node answered early (a refusal) or the stream broke: Finish says which
            }
            at += n;
        }
        writer->WritesDone();
        const grpc::Status status = writer->Finish();
        if (!status.ok()) {
            return failed(status);
        }
        return reply.code() == 0 ? std::pair<ErrorCode, std::string>{ErrorCode::OK, {}}
                                 : node_code(reply.code(), reply.message());
    }

    // The host is gone for this incarnation: say why, and end the process (the supervisor fails what was in
    // flight and starts the link again with back-off).
    [[noreturn]] void lost(const std::string& why) {
        worker::send_lost(control_.get(), host_ + " lost: " + why);
        ::_exit(LINK_LOST_EXIT_CODE);
    }

    void heard() { last_heard_ns_ = worker::monotonic_ns(); }

    // An event of the session's Attach stream, on the session streams' thread (the next is read after this).
    void on_event(const pb::NodeEvent& event) {
        heard();
        switch (event.event_case()) {
        case pb::NodeEvent::kHello: {
            // session_ is written on the session streams' thread alone.
            if (session_ != 0) {
                lost("it sent a second hello in session " + std::to_string(session_));
            }
            if (const auto why = hello_refusal(event.hello(), REMOTE_PROTOCOL)) {
                lost("its hello " + *why);
            }
            std::lock_guard lock(mu_);
            session_ = event.hello().session();
            std::memcpy(node_owner_.data(), event.hello().owner_instance().data(), node_owner_.size());
            cv_.notify_all();
            break;
        }
        case pb::NodeEvent::kStatus:
            push_status(event.status());
            break;
        default:
            break;
        }
    }

    void watch() {
        const auto limit_ns = static_cast<std::uint64_t>(remote_.lost_after.count()) * 1'000'000u;
        const auto step = std::max<std::chrono::milliseconds>(remote_.lost_after / 8, std::chrono::milliseconds(5));
        std::unique_lock lock(mu_);
        while (!stopping_) {
            cv_.wait_for(lock, step);
            if (!stopping_ && worker::monotonic_ns() - last_heard_ns_ > limit_ns) {
                lost(std::string(session_ == 0 ? "no answer to the session request" : "no heartbeat") + " for " +
                     std::to_string(remote_.lost_after.count()) + " ms");
            }
        }
    }

    // The node's tree with its paths under this link's path, as this child's status.
    void push_status(const std::string& tree) {
        std::vector<WorkerStatus> workers;
        try {
            workers = workers_from_json(tree);
        } catch (const std::exception& e) {
            // Tasks are routed by the tree, so a node whose tree cannot be read cannot be served.
            lost("its worker tree is unreadable: " + std::string(e.what()));
        }
        try {
            check_level3_tree(workers);
        } catch (const std::exception& e) {
            // Its paths are routed to and shown in every client's status.
            lost("its worker tree is not a level-3 node's: " + std::string(e.what()));
        }
        for (auto& w : workers) {
            w.path = path_ + w.path;
        }
        const std::string json = workers_to_json(workers);
        ipc::ChildMessage header{};
        header.type = static_cast<std::uint32_t>(ipc::ChildMessageType::STATUS_REPLY);
        header.pid = ::getpid();
        std::vector<std::byte> bytes(sizeof header + json.size());
        if (bytes.size() > ipc::MAX_CHILD_MESSAGE_BYTES) {
            lost("its worker tree of " + std::to_string(workers.size()) + " workers takes " +
                 std::to_string(json.size()) + " bytes, more than a status report holds (" +
                 std::to_string(ipc::MAX_CHILD_MESSAGE_BYTES - sizeof header) + ")");
        }
        std::memcpy(bytes.data(), &header, sizeof header);
        std::memcpy(bytes.data() + sizeof header, json.data(), json.size());
        try {
            ipc::send_message(control_.get(), std::span<const std::byte>(bytes.data(), bytes.size()));
        } catch (const std::exception&) {
            // The parent is gone; this process ends with it.
        }
    }

    // The parent's messages (worker restarts of the node's workers are the node's own business): read and
    // dropped until the socket closes.
    void read_control() {
        for (;;) {
            ipc::ChildMessage m{};
            std::vector<ipc::UniqueFd> fds;
            try {
                if (ipc::recv_message(control_.get(), std::as_writable_bytes(std::span(&m, 1)), fds) == 0) {
                    return;
                }
            } catch (const ipc::FdsTruncated&) {
                continue;
            } catch (const std::exception&) {
                return;
            }
        }
    }

    const std::string l4_name_;
    const std::string path_;
    const config::RemoteConfig remote_;
    ipc::UniqueFd control_;
    ipc::MailboxChild mailbox_;
    const std::string host_;
    std::shared_ptr<grpc::Channel> channel_;
    std::unique_ptr<pb::Node::Stub> stub_;
    std::optional<grpc::internal::RpcMethod> read_method_, write_method_;
    std::atomic<std::uint64_t> last_heard_ns_{0};
    std::atomic<bool> stopping_{false};
    std::mutex mu_;
    std::condition_variable cv_;
    std::uint64_t session_ = 0; // guarded by mu_ until READY, then fixed
    std::thread watchdog_;
    std::thread control_reader_;
    std::unique_ptr<SessionStreams> streams_;
    std::array<std::uint8_t, 16> node_owner_{}; // the node's buffer owner nonce (Hello); fixed after READY
    std::mutex modules_mu_;
    std::condition_variable modules_cv_;
    std::set<std::shared_ptr<ModuleCallState>> modules_; // module calls sent, not yet answered
    std::mutex transfer_mu_;
    std::condition_variable transfer_cv_;
    std::deque<Transfer> transfers_; // queued copies across hosts, run in order by transfer_thread_
    std::thread transfer_thread_;
    grpc::ClientContext* transfer_context_ = nullptr;                 // the transfer in progress, cancelled at stop
    std::map<std::string, std::shared_ptr<const HostWindow>> mapped_; // this host's buffers copies mapped, by identity
};

} // namespace

std::string remote_host_name(const std::string& path, const config::RemoteConfig& remote) {
    return "host " + path.substr(path.rfind('/') + 1) + " at " + config::to_string(remote.address);
}

int run_remote_link(const std::string& l4_name, const std::string& path, const config::RemoteConfig& remote,
                    std::uint32_t generation, ipc::UniqueFd mailbox, ipc::UniqueFd control) {
    RemoteLink link(l4_name, path, remote, std::move(mailbox), std::move(control), generation);
    const int code = link.serve();
    return code;
}

} // namespace canopy::daemon
