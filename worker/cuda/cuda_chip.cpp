#include "worker/cuda/cuda_chip.h"

#include "cuda/context.h"
#include "cuda/module.h"
#include "cuda/stream.h"
#include "ipc/mailbox_child.h"
#include "protocol/task_args.h"
#include "worker/cuda/fatbin.h"
#include "worker/cuda/host_buffers.h"
#include "worker/cuda/launcher.h"

#include <cstdio>
#include <optional>
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

class CudaChip final : public FrameRunner {
public:
    // Throws CudaError when the context, stream or module cannot be set up.
    CudaChip(const WorkerSpec& spec, const cuda::Driver& driver, std::uint32_t device, int mailbox_fd)
        : spec_(spec), context_(driver, static_cast<int>(device)), stream_(driver), module_(driver, kernel_image()),
          launcher_(driver, module_), mailbox_(mailbox_fd, spec.generation), buffers_(driver, spec.path) {}

    int serve(int control) {
        send_ready(control);
        return serve_frames(mailbox_, *this);
    }

    TaskOutcome run(std::string_view kernel, std::span<const std::byte> blob) override {
        try {
            if (kernel == "@release") {
                buffers_.release(decode_release(blob));
                return {};
            }
            decode_task_args_into(blob, args_);
            bind_arguments();
            if (kernel == "@noop") {
                return {};
            }
            if (!kernel.empty() && kernel[0] == '@') {
                return {ErrorCode::UNKNOWN_KERNEL, "unknown control frame " + std::string(kernel)};
            }
            execute(kernel);
            return {};
        } catch (const cuda::CudaError& e) {
            return cuda_failure(kernel, e);
        } catch (...) {
            return outcome_of_current_exception(kernel);
        }
    }

private:
    void bind_arguments() {
        bound_.clear();
        device_bases_.clear();
        for (const TensorArg& arg : args_.tensors) {
            const BufferAddresses at = buffers_.materialize(arg.tensor.buffer);
            bound_.push_back({&arg.tensor, arg.tag, at.host});
            device_bases_.push_back(at.device);
        }
    }

    void execute(std::string_view kernel) {
        if (kernel == "illegal_address") {
            run_illegal_address();
            return;
        }
        const kernels::KernelCall call{kernel, bound_, args_.scalars, nullptr};
        if (runs_on_host(kernel)) {
            kernels::run_builtin(spec_.kind, call, spec_.fault_kernels);
            return;
        }
        kernels::check_builtin(spec_.kind, call, spec_.fault_kernels);
        if (is_peer_kernel(kernel)) {
            // Symmetric buffers (the only ones with a peer table) are device buffers, which are not served yet.
            throw kernels::KernelError(ErrorCode::BAD_REQUEST, std::string(kernel) +
                                                                   ": args[0] is not over a symmetric buffer "
                                                                   "(no peer table)");
        }
        launcher_.launch(call, device_bases_, stream_.get());
        stream_.synchronize();
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
        stream_.synchronize();
        throw kernels::KernelError(ErrorCode::KERNEL_FAILED,
                                   "illegal_address: the store through a bad device address did not fault");
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
    // Destroyed in reverse order: buffers (unregister, unmap), mailbox, launcher, module, stream, context.
    cuda::PrimaryContext context_;
    cuda::Stream stream_;
    cuda::Module module_;
    Launcher launcher_;
    ipc::MailboxChild mailbox_;
    HostBuffers buffers_;
    TaskArgs args_;
    std::vector<kernels::BoundTensor> bound_;
    std::vector<std::uint64_t> device_bases_;
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
        chip.emplace(spec, driver, device, mailbox.get());
    } catch (const cuda::CudaError& e) {
        return fatal(who + " (device " + std::to_string(device) + "): " + e.what());
    }
    mailbox.reset();
    return chip->serve(control.get());
}

} // namespace canopy::worker
