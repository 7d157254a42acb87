#include "worker/worker_loop.h"

#include "ipc/child_message.h"
#include "ipc/fd_passing.h"
#include "ipc/sys_error.h"
#include "protocol/builtin_launch.h"
#include "protocol/module_launch.h"
#include "protocol/task_args.h"
#include "worker/import_registry.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <exception>
#include <string_view>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace canopy::worker {
namespace {

void send_control(int control, ipc::ChildMessageType type, const std::string& text) {
    ipc::ChildMessage m{};
    m.type = static_cast<std::uint32_t>(type);
    m.pid = ::getpid();
    m.text_len = static_cast<std::uint16_t>(std::min(text.size(), sizeof m.text));
    std::memcpy(m.text, text.data(), m.text_len);
    ipc::send_struct(control, m);
}

// The CPU worker of sim chips and subs: kernels run on this thread over host mappings.
class Worker final : public FrameRunner {
public:
    Worker(const WorkerSpec& spec, ipc::UniqueFd mailbox, ipc::UniqueFd control)
        : spec_(spec), control_(std::move(control)), mailbox_(mailbox.get(), spec.generation),
          imports_([this](const BufferDescriptor& d) { return request_fds(control_.get(), d); }) {
        for (const auto& [base, length] : spec.arenas) {
            imports_.register_arena(reinterpret_cast<const void*>(base), length);
        }
    }

    int serve() {
        send_ready(control_.get());
        return serve_frames(mailbox_, *this);
    }

private:
    void release(const CanonicalIdentity& id) override { imports_.release(id); }

    std::optional<TaskOutcome> refuse(std::string_view kernel) override { return refuse_module(spec_, kernel); }

    void execute(std::string_view kernel, const LaunchConfig& launch) override {
        const kernels::KernelCall call{kernel, bound_, args_.scalars, peer_table(), builtin_launch_flags(launch)};
        kernels::run_builtin(spec_.kind, call, spec_.fault_kernels);
    }

    // A sim chip's device memory is a memfd of the buffer's size; the parent holds it from then on.
    void create_vmm(const VmmCreate& request) override {
        const BufferDescriptor& d = *request.descriptor;
        if (spec_.kind != kernels::WorkerKind::CHIP || Backend{d.backend} != Backend::SIM_VMM) {
            throw kernels::KernelError(ErrorCode::BAD_REQUEST, std::string(kernels::to_string(spec_.kind)) + " " +
                                                                   spec_.path + " cannot create a " +
                                                                   to_string(Backend{d.backend}) + " buffer");
        }
        const ipc::UniqueFd fd(ipc::sys_check(::memfd_create("canopy-sim-vmm", MFD_CLOEXEC), "memfd_create"));
        ipc::sys_check(::ftruncate(fd.get(), static_cast<off_t>(d.nbytes)), "ftruncate(memfd)");
        send_fd_offer(control_.get(), d, request.rank, fd.get());
    }

    // The peer table of tensors[0] when it is over a symmetric buffer.
    const kernels::PeerTable* peer_table() {
        if (args_.tensors.empty()) {
            return nullptr;
        }
        const PeerBases* peers = imports_.peers(args_.tensors[0].tensor.buffer.identity);
        if (peers == nullptr) {
            return nullptr;
        }
        table_ = kernels::PeerTable{peers->bases, peers->rank};
        return &table_;
    }

    void bind() override {
        bound_.clear();
        for (const TensorArg& arg : args_.tensors) {
            bound_.push_back({&arg.tensor, arg.tag, imports_.materialize(arg.tensor.buffer)});
        }
    }

    WorkerSpec spec_;
    ipc::UniqueFd control_;
    ipc::MailboxChild mailbox_;
    ImportRegistry imports_;
    std::vector<kernels::BoundTensor> bound_;
    kernels::PeerTable table_{};
};

} // namespace

VmmFds request_fds(int control, const BufferDescriptor& d) {
    ipc::ChildMessage request{};
    request.type = static_cast<std::uint32_t>(ipc::ChildMessageType::FD_REQUEST);
    request.pid = ::getpid();
    request.descriptor = d;
    ipc::send_struct(control, request);
    ipc::ChildMessage reply{};
    std::vector<ipc::UniqueFd> fds;
    const std::size_t n = ipc::recv_message(control, std::as_writable_bytes(std::span(&reply, 1)), fds);
    if (n != sizeof reply || reply.type != static_cast<std::uint32_t>(ipc::ChildMessageType::FD_REPLY)) {
        throw ImportError(ErrorCode::UNREACHABLE_BUFFER, "parent sent no fd reply for " + to_string(d.identity));
    }
    if (reply.code != 0 || fds.empty() || fds.size() != reply.world) {
        const auto len = std::min<std::size_t>(reply.text_len, sizeof reply.text);
        throw ImportError(reply.code != 0 && reply.code <= ERROR_CODE_MAX ? static_cast<ErrorCode>(reply.code)
                                                                          : ErrorCode::UNREACHABLE_BUFFER,
                          "fd request for " + to_string(d.identity) + ": " + std::string(reply.text, len));
    }
    VmmFds out;
    out.fds = std::move(fds);
    out.symmetric = reply.rank != ipc::NOT_SYMMETRIC;
    out.rank = out.symmetric ? reply.rank : 0;
    return out;
}

VmmCreate decode_vmm_create(const TaskArgs& args) {
    if (args.tensors.size() != 1 || args.tensors[0].tag != TensorTag::OUTPUT || args.scalars.size() > 1 ||
        (args.scalars.size() == 1 && args.scalars[0].kind != ScalarKind::INT64)) {
        throw kernels::KernelError(ErrorCode::BAD_REQUEST,
                                   "@vmm_create: expected one output tensor and at most one int64 scalar (the rank)");
    }
    VmmCreate out{&args.tensors[0].tensor.buffer, ipc::NOT_SYMMETRIC};
    if (!args.scalars.empty()) {
        const std::int64_t rank = args.scalars[0].as_i64();
        if (rank < 0 || rank >= static_cast<std::int64_t>(ipc::NOT_SYMMETRIC)) {
            throw kernels::KernelError(ErrorCode::BAD_REQUEST,
                                       "@vmm_create: rank " + std::to_string(rank) + " is out of range");
        }
        out.rank = static_cast<std::uint16_t>(rank);
    }
    return out;
}

void send_fd_offer(int control, const BufferDescriptor& d, std::uint16_t rank, int fd) {
    ipc::ChildMessage m{};
    m.type = static_cast<std::uint32_t>(ipc::ChildMessageType::FD_OFFER);
    m.pid = ::getpid();
    m.world = 1;
    m.rank = rank;
    m.descriptor = d;
    const int fds[] = {fd};
    ipc::send_struct(control, m, fds);
}

std::uint64_t monotonic_ns() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

void FrameDone::operator()(ErrorCode code, std::string_view message, std::uint64_t start_ns,
                           std::uint64_t end_ns) const {
    mailbox_->finish(frame_, trailer_, code, message, start_ns, end_ns);
}

void FrameDone::operator()(const TaskOutcome& outcome) const {
    mailbox_->finish(frame_, trailer_, outcome.code, outcome.message, start_ns_, monotonic_ns());
}

FrameDone FrameRunner::defer() noexcept {
    deferred_ = true;
    return *done_;
}

std::optional<TaskOutcome> FrameRunner::run(const FrameView& frame, const FrameDone& done) noexcept {
    frame_ = &frame;
    done_ = &done;
    deferred_ = false;
    std::optional<TaskOutcome> outcome;
    if (const auto refused = order_.check(frame.after, frame.after_count)) {
        outcome = TaskOutcome{refused->code, refused->message, false};
    } else {
        outcome = run_steps(frame);
    }
    if (deferred_) {
        outcome.reset(); // the deferred FrameDone publishes it; defer() comes after every step that can throw
    }
    order_.record(frame.task_id, outcome ? outcome->code : ErrorCode::OK);
    frame_ = nullptr;
    done_ = nullptr;
    return outcome;
}

std::optional<TaskOutcome> FrameRunner::run_steps(const FrameView& frame) noexcept {
    const std::string_view kernel = frame.kernel;
    const auto step = [&]() -> std::optional<TaskOutcome> {
        if (kernel == "@release") {
            release(decode_release(frame.blob));
            return TaskOutcome{};
        }
        if (auto refused = refuse(kernel)) {
            return refused;
        }
        decode_task_args_into(frame.blob, args_);
        if (kernel == "@vmm_create") {
            create_vmm(decode_vmm_create(args_));
            return TaskOutcome{};
        }
        if (run_control(kernel)) {
            return TaskOutcome{};
        }
        bind();
        if (kernel == "@noop") {
            return TaskOutcome{};
        }
        if (!kernel.empty() && kernel[0] == '@') {
            return TaskOutcome{ErrorCode::UNKNOWN_KERNEL, "unknown control frame " + std::string(kernel)};
        }
        execute(kernel, frame.launch);
        return TaskOutcome{};
    };
    try {
        return step();
    } catch (...) {
        try {
            return failure(kernel);
        } catch (...) {
            return TaskOutcome{ErrorCode::KERNEL_FAILED, std::string(kernel) + ": an error could not be reported",
                               false};
        }
    }
}

int serve_frames(ipc::MailboxChild& mailbox, FrameRunner& runner) {
    FrameTrailer trailer{};
    for (;;) {
        runner.before_next(mailbox.next_ready());
        TaskFrame* frame = mailbox.next(trailer, ipc::MailboxChild::SPIN);
        if (frame == nullptr) {
            break;
        }
        const FrameDone done(mailbox, frame, trailer, monotonic_ns());
        if (!mailbox.trailer_expected(trailer)) {
            done(TaskOutcome{ErrorCode::BAD_REQUEST, "stale frame trailer", false});
            continue;
        }
        if (frame->blob_len > MAX_TASK_ARGS_BYTES) {
            done(TaskOutcome{ErrorCode::INVALID_TENSOR,
                             "header.total_len: blob length " + std::to_string(frame->blob_len) + " exceeds the frame",
                             false});
            continue;
        }
        const FrameView view{std::string_view(frame->kernel, ::strnlen(frame->kernel, KERNEL_NAME_BYTES)),
                             std::string_view(frame->target, ::strnlen(frame->target, TARGET_PATH_BYTES)),
                             frame->launch,
                             std::span<const std::byte>(frame->blob, frame->blob_len),
                             frame->timeout_ms,
                             trailer.task_id,
                             std::span<const std::uint64_t>(frame->after, MAX_FRAME_AFTER),
                             frame->after_count};
        if (const auto outcome = runner.run(view, done)) {
            done(*outcome);
            if (outcome->exit_after) {
                return 1;
            }
        }
    }
    return 0;
}

TaskOutcome outcome_of_current_exception(std::string_view kernel) {
    try {
        throw;
    } catch (const WireError& e) {
        return {e.code(), e.what()};
    } catch (const ImportError& e) {
        return {e.code(), e.what()};
    } catch (const kernels::KernelError& e) {
        return {e.code(), e.what()};
    } catch (const std::exception& e) {
        return {ErrorCode::KERNEL_FAILED, std::string(kernel) + ": " + e.what()};
    } catch (...) {
        return {ErrorCode::KERNEL_FAILED, std::string(kernel) + ": unknown exception"};
    }
}

std::optional<TaskOutcome> refuse_module(const WorkerSpec& spec, std::string_view kernel) {
    const std::string who = std::string(spec.kind == kernels::WorkerKind::CHIP ? "sim chip " : "sub ") + spec.path;
    if (kernel.starts_with(MODULE_LOAD_FRAME) || kernel.starts_with(MODULE_UNLOAD_FRAME)) {
        const std::string_view name = kernel.substr(kernel.find(':') + 1);
        return TaskOutcome{ErrorCode::UNKNOWN_KERNEL,
                           who + " cannot load module " + std::string(name) + " (module kernels run on cuda chips)"};
    }
    if (!kernel.starts_with("@") && is_module_kernel(kernel)) {
        return TaskOutcome{ErrorCode::UNKNOWN_KERNEL, who + " cannot run module kernel " + std::string(kernel) +
                                                          " (module kernels run on cuda chips)"};
    }
    return std::nullopt;
}

CanonicalIdentity decode_release(std::span<const std::byte> blob) {
    CanonicalIdentity id{};
    if (blob.size() != sizeof id) {
        throw kernels::KernelError(ErrorCode::BAD_REQUEST, "@release: expected a 32-byte identity");
    }
    std::memcpy(&id, blob.data(), sizeof id);
    validate_identity(id);
    return id;
}

void send_ready(int control, const std::string& text) {
    send_control(control, ipc::ChildMessageType::READY, text);
}

void send_fatal(int control, const std::string& why) noexcept {
    try {
        send_control(control, ipc::ChildMessageType::FATAL, why);
    } catch (const std::exception&) {
        // The parent learns of the exit from the zygote either way.
    }
}

void send_lost(int control, const std::string& why) noexcept {
    try {
        send_control(control, ipc::ChildMessageType::LOST, why);
    } catch (const std::exception&) {
        // The parent learns of the exit from the zygote either way.
    }
}

int run_worker(const WorkerSpec& spec, ipc::UniqueFd mailbox, ipc::UniqueFd control) {
    Worker worker(spec, std::move(mailbox), std::move(control));
    return worker.serve();
}

} // namespace canopy::worker
