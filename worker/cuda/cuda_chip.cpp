#include "worker/cuda/cuda_chip.h"

#include "cuda/context.h"
#include "cuda/module.h"
#include "cuda/stream.h"
#include "ipc/child_message.h"
#include "ipc/mailbox_child.h"
#include "protocol/builtin_launch.h"
#include "protocol/task_args.h"
#include "worker/cuda/chip_buffers.h"
#include "worker/cuda/fatbin.h"
#include "worker/cuda/launch_queue.h"
#include "worker/cuda/launcher.h"
#include "worker/cuda/lt_matmul.h"
#include "worker/cuda/user_modules.h"

#include <cstdio>
#include <optional>
#include <stdexcept>
#include <string>
#include <unistd.h>
#include <vector>

namespace canopy::worker {
namespace {

// The built-ins that touch no buffer memory and run on the CPU, as on a sim chip.
bool runs_on_host(std::string_view kernel) noexcept {
    return kernel == "sleep_ms" || kernel == "abort" || kernel == "segfault";
}

bool is_peer_kernel(std::string_view kernel) noexcept {
    return kernel == "peer_read" || kernel == "allgather";
}

// The chip's launch queue was poisoned by a fault of its context: no further task runs.
class ChipPoisoned : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class CudaChip final : public FrameRunner {
public:
    // Throws CudaError when the context, stream or module cannot be set up.
    CudaChip(const WorkerSpec& spec, const cuda::Driver& driver, std::uint32_t device, int mailbox_fd, int control)
        : spec_(spec), control_(control), driver_(driver), context_(driver, static_cast<int>(device)), stream_(driver),
          module_(driver, kernel_image()), lt_(driver, "cuda chip " + spec.path), launcher_(driver, module_, &lt_),
          mailbox_(mailbox_fd, spec.generation),
          buffers_(driver, spec.path, static_cast<int>(device),
                   [control](const BufferDescriptor& d) { return request_fds(control, d); }),
          queue_(driver, context_, "cuda chip " + spec.path, [this] { mailbox_.interrupt(); }),
          modules_(driver, spec.path, static_cast<int>(device)) {}

    // Serves frames until shutdown, or until a fault of the context (found by a launch or by the launch queue)
    // ends the chip; every task launched is reported before it returns.
    int serve() {
        send_ready(control_);
        int rc = serve_frames(mailbox_, *this);
        queue_.drain(stream_.get());
        if (queue_.poisoned()) {
            rc = 1;
        }
        return rc;
    }

private:
    // Kernels in flight may still use the buffer's mapping.
    void release(const CanonicalIdentity& id) override {
        queue_.drain(stream_.get());
        buffers_.release(id);
    }

    TaskOutcome failure(std::string_view kernel) override {
        try {
            throw;
        } catch (const cuda::CudaError& e) {
            return cuda_failure(kernel, e);
        } catch (const ChipPoisoned& e) {
            return TaskOutcome{ErrorCode::KERNEL_FAILED,
                               std::string(kernel) + ": " + e.what() + "; the CUDA context of cuda chip " + spec_.path +
                                   " is unusable, the chip restarts",
                               true};
        } catch (...) {
            return outcome_of_current_exception(kernel);
        }
    }

    // The task was launched on the stream: the launch queue reports it when the GPU has finished it, once its
    // batch is sealed (before_next).
    void launched(std::string_view kernel) { queue_.add(defer(), kernel); }

    // The launches since the last seal are sealed under one event when no further frame waits, whatever the
    // frames after them were (a host kernel, a refusal, a control frame), or when they are MAX_BATCH long. The
    // loop may then block in the mailbox: a launch left unsealed would never be reported. With no frame waiting
    // the loop itself waits for the batch while no frame comes, when the launch queue's thread sleeps.
    void before_next(bool next_ready) noexcept override {
        if (!next_ready) {
            queue_.seal_idle(stream_.get(), [this] { return mailbox_.next_ready(); });
        } else if (queue_.unsealed() >= LaunchQueue::MAX_BATCH) {
            queue_.seal(stream_.get());
        }
    }

    void bind() override {
        bound_.clear();
        device_bases_.clear();
        for (const TensorArg& arg : args_.tensors) {
            const BufferAddresses at = buffers_.materialize(arg.tensor.buffer);
            bound_.push_back({&arg.tensor, arg.tag, at.host});
            device_bases_.push_back(at.device);
        }
    }

    // @vmm_create: args = one OUTPUT tensor over the new buffer's descriptor, and for a rank of a symmetric
    // buffer one int64 scalar, the rank. Creates the allocation and hands its fd to the parent, which holds it.
    void create_vmm(const VmmCreate& request) override {
        const ipc::UniqueFd fd = buffers_.create_vmm(*request.descriptor, request.rank != ipc::NOT_SYMMETRIC);
        send_fd_offer(control_, *request.descriptor, request.rank, fd.get());
    }

    // @module_load:NAME and @module_unload:NAME (worker/cuda/user_modules.h); false for any other kernel.
    bool run_control(std::string_view kernel) override {
        if (kernel.starts_with(MODULE_LOAD_FRAME)) {
            modules_.load(kernel.substr(MODULE_LOAD_FRAME.size()), args_);
            return true;
        }
        if (kernel.starts_with(MODULE_UNLOAD_FRAME)) {
            queue_.drain(stream_.get()); // launches of its kernels may be in flight
            modules_.unload(kernel.substr(MODULE_UNLOAD_FRAME.size()));
            return true;
        }
        return false;
    }

    void execute(std::string_view kernel, const LaunchConfig& launch) override {
        if (const std::optional<std::string> poison = queue_.poisoned()) {
            throw ChipPoisoned(*poison);
        }
        if (is_module_kernel(kernel)) {
            modules_.launch(kernel, launch, args_, device_bases_, stream_.get());
            launched(kernel);
            return;
        }
        if (kernel == "illegal_address") {
            run_illegal_address();
            launched(kernel);
            return;
        }
        const kernels::KernelCall call{kernel, bound_, args_.scalars, nullptr, builtin_launch_flags(launch)};
        if (is_peer_kernel(kernel)) {
            queue_.drain(stream_.get());
            execute_peer(kernel, call.launch_flags);
            return;
        }
        if (runs_on_host(kernel)) {
            kernels::run_builtin(spec_.kind, call, spec_.fault_kernels);
            return;
        }
        kernels::check_builtin(spec_.kind, call, spec_.fault_kernels);
        if (kernel == "copy" && dense_copy()) {
            launched(kernel);
            return;
        }
        launcher_.launch(call, device_bases_, stream_.get());
        launched(kernel);
    }

    // copy between two dense views of one dtype is a byte copy: the copy engine does it (host memory at its
    // host address, which the driver knows as registered, so the transfer is DMA at full PCIe speed). Views
    // that are not both dense go to the copy kernel. The bytes moved are those the kernel would move.
    bool dense_copy() {
        const Tensor& in = *bound_[0].view;
        const Tensor& out = *bound_[1].view;
        if (!tensor_is_contiguous(in) || !tensor_is_contiguous(out) || in.dtype != out.dtype ||
            tensor_element_count(in) != tensor_element_count(out)) {
            return false;
        }
        const std::uint64_t bytes = tensor_element_count(out) * element_size(out.dtype);
        auto address = [&](std::size_t i) {
            const Tensor& view = *bound_[i].view;
            const std::uint64_t base =
                bound_[i].base != nullptr ? static_cast<std::uint64_t>(reinterpret_cast<std::uintptr_t>(bound_[i].base))
                                          : device_bases_[i];
            return base + view.byte_offset;
        };
        CANOPY_CU(driver_, cuMemcpyAsync, address(1), address(0), bytes, stream_.get());
        return true;
    }

    // peer_read and allgather: checked on the host against the peer table, then checked again on the device
    // before every peer access.
    void execute_peer(std::string_view kernel, std::uint32_t launch_flags) {
        const CanonicalIdentity& id =
            args_.tensors.empty() ? CanonicalIdentity{} : args_.tensors[0].tensor.buffer.identity;
        const PeerBases* bases = args_.tensors.empty() ? nullptr : buffers_.peer_bases(id);
        if (bases != nullptr) {
            table_ = kernels::PeerTable{bases->bases, bases->rank};
        }
        const kernels::KernelCall call{kernel, bound_, args_.scalars, bases != nullptr ? &table_ : nullptr,
                                       launch_flags};
        kernels::check_builtin(spec_.kind, call, spec_.fault_kernels);
        if (bases == nullptr) {
            throw kernels::KernelError(ErrorCode::BAD_REQUEST,
                                       std::string(kernel) +
                                           ": args[0] is not over a symmetric buffer (no peer table)");
        }
        const DevicePeers* peers = buffers_.peers(id);
        launcher_.launch_peer(call, device_bases_, peers->table, peers->world, stream_.get());
        stream_.synchronize();
        if (launcher_.peer_error()) {
            throw kernels::KernelError(ErrorCode::PE_OUT_OF_RANGE,
                                       std::string(kernel) + ": a pe outside the world of " +
                                           std::to_string(peers->world) + " was refused on the device");
        }
    }

    void run_illegal_address() {
        if (!spec_.fault_kernels) {
            throw kernels::KernelError(ErrorCode::UNKNOWN_KERNEL,
                                       "illegal_address: fault kernels are disabled (enable them with "
                                       "\"testing\": {\"fault_kernels\": true})");
        }
        if (!args_.tensors.empty() || !args_.scalars.empty()) {
            throw kernels::KernelError(ErrorCode::BAD_REQUEST, "illegal_address: takes no arguments, got " +
                                                                   std::to_string(args_.tensors.size()) +
                                                                   " tensors and " +
                                                                   std::to_string(args_.scalars.size()) + " scalars");
        }
        launcher_.launch_illegal_address(stream_.get());
    }

    // A CUDA error fails the task; a sticky one (or any error the context keeps returning) also ends the worker.
    TaskOutcome cuda_failure(std::string_view kernel, const cuda::CudaError& e) {
        TaskOutcome outcome{ErrorCode::KERNEL_FAILED, std::string(kernel) + ": " + e.what(), false};
        if (cuda::is_sticky(e.result()) || !context_usable()) {
            outcome.message += "; the CUDA context of cuda chip " + spec_.path + " is unusable, the chip restarts";
            outcome.exit_after = true;
            ::dprintf(2, "canopy: cuda chip %s: %s\n", spec_.path.c_str(), outcome.message.c_str());
        }
        return outcome;
    }

    bool context_usable() const noexcept {
        try {
            context_.synchronize();
            return true;
        } catch (const cuda::CudaError&) {
            return false;
        }
    }

    WorkerSpec spec_;
    int control_;
    const cuda::Driver& driver_;
    // Destroyed in reverse order: buffers (unregister, unmap), mailbox, launcher, cuBLASLt (its handle and
    // workspace), module, stream, context.
    cuda::PrimaryContext context_;
    cuda::Stream stream_;
    cuda::Module module_;
    LtMatmul lt_;
    Launcher launcher_;
    ipc::MailboxChild mailbox_;
    ChipBuffers buffers_;
    // Destroyed before the buffers, the mailbox and the context: its thread publishes results and queries events.
    LaunchQueue queue_;
    std::vector<kernels::BoundTensor> bound_;
    std::vector<std::uint64_t> device_bases_;
    kernels::PeerTable table_{};
    // Declared last, so destroyed first: every user module unloads while the context lives.
    UserModules modules_;
};

std::string gpus(int count) {
    return std::to_string(count) + (count == 1 ? " GPU" : " GPUs");
}

} // namespace

int run_cuda_chip(const WorkerSpec& spec, std::uint32_t device, ipc::UniqueFd mailbox, ipc::UniqueFd control) {
    const std::string who = "cuda chip " + spec.path;
    auto fatal = [&](const std::string& why) {
        send_fatal(control.get(), why);
        ::dprintf(2, "canopy: %s\n", why.c_str());
        return FATAL_EXIT_CODE;
    };
    if (kernel_image().empty()) {
        return fatal(who + ": built without the CUDA Toolkit, so no GPU kernels are embedded; rebuild canopy "
                           "with the toolkit (nvcc) to run cuda chips");
    }
    std::optional<CudaChip> chip;
    try {
        const cuda::Driver& driver = cuda::Driver::get();
        const int count = cuda::device_count(driver);
        if (device >= static_cast<std::uint32_t>(count)) {
            return fatal(who + ": device " + std::to_string(device) + " does not exist (" + gpus(count) + " visible)");
        }
        chip.emplace(spec, driver, device, mailbox.get(), control.get());
    } catch (const cuda::CudaError& e) {
        return fatal(who + " (device " + std::to_string(device) + "): " + e.what());
    }
    mailbox.reset();
    return chip->serve();
}

} // namespace canopy::worker
