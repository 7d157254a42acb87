#pragma once
// UserModules: the user modules a cuda chip has loaded (docs/modules.md), and the launches of their kernels.
//
// load(NAME, args) serves an @module_load:NAME frame, whose args are one INPUT uint8[n] tensor over a POSIX_SHM
// buffer holding the image (the supervisor's copy). The buffer is mapped through a private ImportRegistry (the
// name and size checks every buffer gets, but no registration with CUDA: the GPU never reads it), copied (with
// a NUL after PTX) and unmapped, then loaded through the JIT with its error log captured. A module already
// loaded under NAME is replaced: its kernels stay usable until the new image loaded, then it is unloaded.
// unload(NAME) drops one.
//
// launch() runs NAME:function with the frame's LaunchConfig: the launch passes validate_module_launch, the
// module and the function exist, the block fits the function's thread limit and the dynamic shared memory the
// device's opt-in limit; then each parameter i is, in order, the next tensor (scalar_slots bit i clear: a 64-bit
// device pointer to the view's first element, i.e. the buffer's device base + byte_offset) or the next scalar
// (bit set: a float, double or int64 by value, as its ScalarKind says).
//
// Errors: KernelError UNKNOWN_KERNEL (no module NAME on this chip; module NAME has no kernel F), BAD_REQUEST
// (a launch or parameter list the gate or the kernel's limits refuse; a malformed @module_load frame; an image
// that is neither PTX nor a cubin/fatbin); CudaError for a driver call that fails (a JIT error carries the
// JIT's log), which the chip turns into KERNEL_FAILED.
//
// Ownership: owns the loaded modules (cuda::Module: unloaded on destruction); borrows the driver. REQUIRES the
// context the modules are loaded into to be current and to outlive the UserModules. Function handles are
// cached per module and die with it.
// Thread safety: none; the chip's main thread owns it.

#include "cuda/module.h"
#include "protocol/mailbox.h"
#include "protocol/module_launch.h"
#include "protocol/task_args.h"
#include "worker/import_registry.h"

#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>

namespace canopy::worker {

class UserModules {
public:
    // `chip_path` ("/chip0") names the chip in messages; `ordinal` is its device.
    UserModules(const cuda::Driver& driver, std::string chip_path, int ordinal);
    UserModules(const UserModules&) = delete;
    UserModules& operator=(const UserModules&) = delete;

    void load(std::string_view name, const TaskArgs& args);
    void unload(std::string_view name);

    // Queues NAME:function on `stream`; returns without waiting. REQUIRES: device_bases[i] is the device address
    // of byte 0 of args.tensors[i]'s buffer.
    void launch(std::string_view kernel, const LaunchConfig& launch, const TaskArgs& args,
                std::span<const std::uint64_t> device_bases, cuda::CuStream stream);

    std::size_t size() const noexcept { return modules_.size(); }

private:
    struct Function {
        cuda::CuFunction handle = nullptr;
        int max_threads = 0;        // per block
        int static_shared = 0;      // bytes
        int max_dynamic_shared = 0; // bytes the function may be launched with now
    };
    struct Loaded {
        cuda::Module module;
        std::unordered_map<std::string, Function> functions;
    };

    Function& function(std::string_view kernel, Loaded& loaded);
    void check_limits(std::string_view kernel, const LaunchConfig& launch, Function& f);
    int shared_optin();

    const cuda::Driver& driver_;
    std::string path_;
    int ordinal_;
    int shared_optin_ = -1; // the device's opt-in shared memory per block; -1 until asked
    ImportRegistry images_; // maps module images for the length of a load
    std::unordered_map<std::string, Loaded> modules_;
    std::array<std::uint64_t, MAX_MODULE_PARAMS> values_{}; // parameter storage of the launch being built
    std::array<void*, MAX_MODULE_PARAMS> params_{};
};

} // namespace canopy::worker
