#include "cuda/driver.h"
#include "daemon/json_codec.h"
#include "daemon/remote_link.h"
#include "daemon/supervisor.h"
#include "ipc/child_message.h"
#include "ipc/fd_passing.h"
#include "ipc/mailbox_child.h"
#include "protocol/module_launch.h"
#include "worker/cuda/cuda_chip.h"
#include "worker/import_registry.h"
#include "worker/worker_loop.h"

#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <optional>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace canopy::daemon {
namespace {

void send_control(int control, ipc::ChildMessageType type, const std::string& text = {}) {
    ipc::ChildMessage m{};
    m.type = static_cast<std::uint32_t>(type);
    m.pid = ::getpid();
    m.text_len = static_cast<std::uint16_t>(std::min(text.size(), sizeof m.text));
    std::memcpy(m.text, text.data(), m.text_len);
    ipc::send_struct(control, m);
}

// Reports a reason the child cannot serve, then exits with EX_CONFIG; the supervisor does not restart it.
int fatal(int control, const std::string& why) {
    try {
        send_control(control, ipc::ChildMessageType::FATAL, why);
    } catch (const std::exception&) {
    }
    ::dprintf(2, "canopy: %s\n", why.c_str());
    return 78;
}

// The next-level worker: serves the parent's mailbox through serve_frames like any worker, and hands each task
// on to this nested supervisor's own children. A forwarded frame is published from the nested supervisor's
// threads when its result comes back; every frame is finished exactly once.
class NextLevelWorker final : public ParentLink, public worker::FrameRunner {
public:
    // `control` stays owned by the caller and must outlive the worker.
    NextLevelWorker(Supervisor& nested, ipc::UniqueFd mailbox, int control, std::uint32_t generation)
        : nested_(nested), control_(control), mailbox_(mailbox.get(), generation) {}

    // One request at a time goes up; the control reader thread hands the parent's FD_REPLY back.
    worker::VmmFds fetch_fds(const BufferDescriptor& d, const std::string& requester) override {
        std::lock_guard one(fetch_mu_);
        {
            std::lock_guard lock(reply_mu_);
            reply_.reset();
        }
        ipc::ChildMessage request{};
        request.type = static_cast<std::uint32_t>(ipc::ChildMessageType::FD_REQUEST);
        request.pid = ::getpid();
        request.descriptor = d;
        request.text_len = static_cast<std::uint16_t>(std::min(requester.size(), sizeof request.text));
        std::memcpy(request.text, requester.data(), request.text_len);
        ipc::send_struct(control_, request);
        std::unique_lock lock(reply_mu_);
        if (!reply_cv_.wait_for(lock, std::chrono::seconds(10), [&] { return reply_.has_value(); })) {
            throw worker::ImportError(ErrorCode::UNREACHABLE_BUFFER,
                                      "the parent supervisor did not answer the fd request for " +
                                          to_string(d.identity));
        }
        auto [reply, fds] = std::move(*reply_);
        reply_.reset();
        if (reply.code != 0 || fds.empty() || fds.size() != reply.world) {
            const auto len = std::min<std::size_t>(reply.text_len, sizeof reply.text);
            throw worker::ImportError(reply.code != 0 && reply.code <= ERROR_CODE_MAX
                                          ? static_cast<ErrorCode>(reply.code)
                                          : ErrorCode::UNREACHABLE_BUFFER,
                                      std::string(reply.text, len));
        }
        worker::VmmFds out;
        out.fds = std::move(fds);
        out.symmetric = reply.rank != ipc::NOT_SYMMETRIC;
        out.rank = out.symmetric ? reply.rank : 0;
        return out;
    }

    void relay_offer(const BufferDescriptor& d, std::uint16_t rank, int fd) override {
        worker::send_fd_offer(control_, d, rank, fd);
    }

    int serve() {
        push_status();
        send_control(control_, ipc::ChildMessageType::READY);
        std::thread control_thread([this] { read_control(); });
        const int code = worker::serve_frames(mailbox_, *this);
        ::shutdown(control_, SHUT_RDWR);
        control_thread.join();
        return code;
    }

    // Sends the nested tree to the parent, which answers its status requests from the latest one. Called
    // before READY and whenever the tree changes, from any thread; one snapshot at a time, in order.
    void push_status() {
        std::lock_guard one(push_mu_);
        const std::string tree = workers_to_json(nested_.status());
        ipc::ChildMessage header{};
        header.type = static_cast<std::uint32_t>(ipc::ChildMessageType::STATUS_REPLY);
        header.pid = ::getpid();
        std::vector<std::byte> bytes(sizeof header + tree.size());
        std::memcpy(bytes.data(), &header, sizeof header);
        std::memcpy(bytes.data() + sizeof header, tree.data(), tree.size());
        try {
            ipc::send_message(control_, std::span<const std::byte>(bytes.data(), bytes.size()));
        } catch (const std::exception&) {
            // The parent is gone; this process ends with it.
        }
    }

protected:
    void release(const CanonicalIdentity& id) override {
        imports_.release(id);
        nested_.broadcast_release(id);
    }

    // A device buffer of the parent's, made by a chip below: its fd comes up through relay_offer.
    void create_vmm(const worker::VmmCreate& /*request*/) override {
        std::vector<std::byte> blob(frame().blob.begin(), frame().blob.end());
        const std::string target(frame().target);
        nested_.submit_control(target, "@vmm_create", std::move(blob), forward_to(defer()));
    }

    // @module_load:NAME: loads the image (in the parent's shm buffer, mapped here for the copy) into this nested
    // supervisor, which forwards it to its own cuda chips; the frame finishes when they all answered, with the
    // chips' paths (space-separated) as its message on success. @module_unload:NAME unloads it here.
    bool run_control(std::string_view kernel) override {
        if (!kernel.starts_with(MODULE_LOAD_FRAME) && !kernel.starts_with(MODULE_UNLOAD_FRAME)) {
            return false;
        }
        const std::string name(kernel.substr(kernel.find(':') + 1));
        if (kernel.starts_with(MODULE_UNLOAD_FRAME)) {
            (void)nested_.unload_module(name);
            return true;
        }
        if (args_.tensors.size() != 1 || !args_.scalars.empty() || args_.tensors[0].tensor.dtype != DataType::UINT8 ||
            args_.tensors[0].tensor.ndims != 1 || args_.tensors[0].tensor.strides[0] != 1) {
            throw WireError(ErrorCode::BAD_REQUEST, "args",
                            std::string(kernel) + " expects one uint8[n] tensor over the image");
        }
        const Tensor& view = args_.tensors[0].tensor;
        std::vector<std::byte> image;
        {
            const std::byte* base = imports_.materialize(view.buffer) + view.byte_offset;
            image.assign(base, base + view.shapes[0]);
            imports_.release(view.buffer.identity);
        }
        const worker::FrameDone done = defer();
        try {
            nested_.load_module_async(name, std::move(image), [done](ModuleLoadResult r) {
                std::string chips;
                for (const auto& chip : r.module.chips) {
                    chips += (chips.empty() ? "" : " ") + chip;
                }
                done(worker::TaskOutcome{r.code, r.code == ErrorCode::OK ? chips : r.message});
            });
        } catch (const RequestError& e) {
            done(worker::TaskOutcome{e.code(), e.what()}); // refused before it took the callback
        }
        return true;
    }

    // The chips below check what they map; the nested supervisor checks every POSIX shm name and size here.
    void bind() override {
        for (const TensorArg& arg : args_.tensors) {
            if (Backend{arg.tensor.buffer.backend} == Backend::POSIX_SHM) {
                imports_.materialize(arg.tensor.buffer);
            }
        }
    }

    void execute(std::string_view kernel, const LaunchConfig& launch) override {
        TaskRequest request;
        request.kernel = std::string(kernel);
        request.worker = std::string(frame().target);
        request.args = args_;
        request.launch = launch;
        request.timeout = std::chrono::milliseconds(frame().timeout_ms);
        nested_.submit(std::move(request), forward_to(defer()));
    }

private:
    // The callback that publishes a forwarded frame's result with the times its worker reported.
    static TaskCallback forward_to(const worker::FrameDone& done) {
        return [done](TaskResult r) { done(r.code, r.message, r.start_ns, r.end_ns); };
    }

    // Takes the parent's FD_REPLYs and WORKER_RESTART requests until the socket closes.
    void read_control() {
        for (;;) {
            ipc::ChildMessage m{};
            std::vector<ipc::UniqueFd> fds;
            try {
                if (ipc::recv_message(control_, std::as_writable_bytes(std::span(&m, 1)), fds) != sizeof m) {
                    return;
                }
            } catch (const std::exception&) {
                return;
            }
            switch (static_cast<ipc::ChildMessageType>(m.type)) {
            case ipc::ChildMessageType::FD_REPLY: {
                std::lock_guard lock(reply_mu_);
                reply_.emplace(m, std::move(fds));
                reply_cv_.notify_all();
                break;
            }
            case ipc::ChildMessageType::WORKER_RESTART:
                try {
                    nested_.restart_worker(std::string(m.text, std::min<std::size_t>(m.text_len, sizeof m.text)));
                } catch (const std::exception& e) {
                    ::dprintf(2, "canopy: %s: worker restart: %s\n", nested_.options().path.c_str(), e.what());
                }
                break;
            default:
                break;
            }
        }
    }

    Supervisor& nested_;
    int control_;
    ipc::MailboxChild mailbox_;
    worker::ImportRegistry imports_;
    std::mutex fetch_mu_; // one fd request to the parent at a time
    std::mutex push_mu_;  // one status push at a time
    std::mutex reply_mu_;
    std::condition_variable reply_cv_;
    std::optional<std::pair<ipc::ChildMessage, std::vector<ipc::UniqueFd>>> reply_;
};

int run_nested(const SupervisorOptions& options, const SpawnRequest& request, ipc::UniqueFd mailbox,
               ipc::UniqueFd control) {
    try {
        // This process is single-threaded here: the nested supervisor forks its own zygote first.
        Supervisor nested(options);
        NextLevelWorker worker(nested, std::move(mailbox), control.get(), request.generation);
        nested.set_parent(&worker);
        nested.set_on_change([&worker] { worker.push_status(); });
        // A tree that cannot heal: this process exits, and its parent restarts it afresh.
        nested.set_on_fatal([](const std::string&) { ::_exit(70); });
        // The nested supervisor stops (joining every thread that may use the link) before the worker goes. Its
        // parent drained before it asked this node to stop, so nothing more is waited for.
        struct StopFirst {
            Supervisor& supervisor;
            ~StopFirst() { supervisor.stop(std::chrono::steady_clock::now()); }
        } stop_first{nested};
        nested.start();
        return worker.serve();
    } catch (const std::exception& e) {
        return fatal(control.get(), "nested supervisor " + options.path + ": " + e.what());
    }
}

// A sub runs users' CPU kernels, so it never outranks the host's other work: a negative nice value, which canopyd
// runs at under its unit so that its own hand-offs do not wait a scheduler slice each on a busy host
// (docs/operations.md, "A busy host"), goes back to 0. Called while the process has one thread: Linux keeps a
// nice value per thread, and the threads it starts inherit it.
void sub_at_default_priority() noexcept {
    errno = 0;
    const int nice = ::getpriority(PRIO_PROCESS, 0);
    if (errno == 0 && nice < 0) {
        (void)::setpriority(PRIO_PROCESS, 0, 0);
    }
}

} // namespace

int run_child(const SupervisorOptions& options, const SpawnRequest& request, ipc::UniqueFd mailbox,
              ipc::UniqueFd control) {
    const ChildSpec& spec = options.children.at(request.child_index);
    const std::string path = options.child_path(spec.name);
    const std::string comm = "canopy-" + spec.name;
    ::prctl(PR_SET_NAME, comm.c_str());
    switch (spec.kind) {
    case ChildKind::SIM_CHIP:
    case ChildKind::SUB: {
        if (spec.kind == ChildKind::SUB) {
            sub_at_default_priority();
        }
        worker::WorkerSpec ws;
        ws.kind = spec.kind == ChildKind::SUB ? kernels::WorkerKind::SUB : kernels::WorkerKind::CHIP;
        ws.path = path;
        ws.generation = request.generation;
        ws.fault_kernels = options.fault_kernels;
        for (const ArenaView& arena : options.arenas) {
            ws.arenas.emplace_back(arena.base, arena.length);
        }
        return worker::run_worker(ws, std::move(mailbox), std::move(control));
    }
    case ChildKind::CUDA_CHIP: {
        worker::WorkerSpec ws;
        ws.kind = kernels::WorkerKind::CHIP;
        ws.path = path;
        ws.generation = request.generation;
        ws.fault_kernels = options.fault_kernels;
        return worker::run_cuda_chip(ws, spec.device, std::move(mailbox), std::move(control));
    }
    case ChildKind::NODE:
        return run_nested(*spec.node, request, std::move(mailbox), std::move(control));
    case ChildKind::REMOTE:
        return run_remote_link(options.name, path, *spec.remote, request.generation, std::move(mailbox),
                               std::move(control));
    }
    return fatal(control.get(), "unknown child kind");
}

} // namespace canopy::daemon
