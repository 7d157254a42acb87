#include "worker/cuda/user_modules.h"

#include "cuda/context.h"
#include "protocol/module_image.h"
#include "worker/kernels/kernel_error.h"

#include <cstring>
#include <utility>
#include <vector>

namespace canopy::worker {
namespace {

[[noreturn]] void refuse(ErrorCode code, std::string_view kernel, const std::string& problem) {
    throw kernels::KernelError(code, std::string(kernel) + ": " + problem);
}

// The image bytes an @module_load frame points at: one INPUT uint8[n] tensor, contiguous.
const Tensor& image_view(std::string_view frame, const TaskArgs& args) {
    const bool shaped = args.tensors.size() == 1 && args.scalars.empty() && args.tensors[0].tag == TensorTag::INPUT &&
                        args.tensors[0].tensor.dtype == DataType::UINT8 && args.tensors[0].tensor.ndims == 1 &&
                        args.tensors[0].tensor.strides[0] == 1;
    if (!shaped) {
        refuse(ErrorCode::BAD_REQUEST, frame, "expects one input uint8[n] tensor over the module image");
    }
    return args.tensors[0].tensor;
}

} // namespace

UserModules::UserModules(const cuda::Driver& driver, std::string chip_path, int ordinal)
    : driver_(driver), path_(std::move(chip_path)), ordinal_(ordinal) {}

void UserModules::load(std::string_view name, const TaskArgs& args) {
    const std::string frame = std::string(MODULE_LOAD_FRAME) + std::string(name);
    if (!is_valid_module_name(name)) {
        refuse(ErrorCode::BAD_REQUEST, frame, "module name must match [A-Za-z_][A-Za-z0-9_]{0,39}");
    }
    const Tensor& view = image_view(frame, args);
    std::vector<std::byte> image;
    {
        const std::byte* base = images_.materialize(view.buffer) + view.byte_offset;
        image.assign(base, base + view.shapes[0]);
        images_.release(view.buffer.identity);
    }
    const auto format = detect_module_format(image);
    if (!format) {
        refuse(ErrorCode::BAD_REQUEST, frame,
               "module " + std::string(name) + ": the image is neither PTX nor a cubin/fatbin");
    }
    if (*format == ModuleFormat::PTX) {
        image.push_back(std::byte{0}); // the driver reads PTX up to its NUL
    }
    cuda::Module module = cuda::Module::load_logged(driver_, image, "module " + std::string(name));
    modules_.insert_or_assign(std::string(name), Loaded{std::move(module), {}});
}

void UserModules::unload(std::string_view name) {
    modules_.erase(std::string(name));
}

UserModules::Function& UserModules::function(std::string_view kernel, Loaded& loaded) {
    const std::string name(function_of(kernel));
    if (auto it = loaded.functions.find(name); it != loaded.functions.end()) {
        return it->second;
    }
    Function f;
    const auto found =
        static_cast<cuda::CuResult>(driver_.api().cuModuleGetFunction(&f.handle, loaded.module.get(), name.c_str()));
    if (found == cuda::ERROR_NOT_FOUND) {
        refuse(ErrorCode::UNKNOWN_KERNEL, kernel,
               "module " + std::string(module_of(kernel)) + " has no kernel " + name);
    }
    driver_.check(found, "cuModuleGetFunction", "kernel " + std::string(kernel));
    const auto attribute = [&](int which, int& out) {
        driver_.check(driver_.api().cuFuncGetAttribute(&out, static_cast<cuda::CuFunctionAttribute>(which), f.handle),
                      "cuFuncGetAttribute", "kernel " + std::string(kernel));
    };
    attribute(cuda::FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK, f.max_threads);
    attribute(cuda::FUNC_ATTRIBUTE_SHARED_SIZE_BYTES, f.static_shared);
    attribute(cuda::FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, f.max_dynamic_shared);
    return loaded.functions.emplace(name, f).first->second;
}

int UserModules::shared_optin() {
    if (shared_optin_ < 0) {
        shared_optin_ = cuda::device_attribute(driver_, ordinal_, cuda::ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN);
    }
    return shared_optin_;
}

// The kernel's own limits: threads per block as compiled, and dynamic shared memory up to the device's opt-in
// limit (raising the function's limit when a launch asks for more than its current one).
void UserModules::check_limits(std::string_view kernel, const LaunchConfig& launch, Function& f) {
    const std::uint64_t threads =
        std::uint64_t{launch.block[0]} * std::uint64_t{launch.block[1]} * std::uint64_t{launch.block[2]};
    if (threads > static_cast<std::uint64_t>(f.max_threads)) {
        refuse(ErrorCode::BAD_REQUEST, kernel,
               "launch.block: " + std::to_string(threads) + " threads per block, the kernel allows at most " +
                   std::to_string(f.max_threads) + " (its MAX_THREADS_PER_BLOCK on " + path_ + ")");
    }
    const auto shared = static_cast<std::int64_t>(launch.shared_bytes);
    if (shared <= f.max_dynamic_shared) {
        return;
    }
    const std::int64_t limit = std::int64_t{shared_optin()} - f.static_shared;
    if (shared > limit) {
        refuse(ErrorCode::BAD_REQUEST, kernel,
               "launch.shared_bytes: " + std::to_string(shared) + " bytes of dynamic shared memory, the device of " +
                   path_ + " allows at most " + std::to_string(limit) + " for this kernel (" +
                   std::to_string(shared_optin()) + " per block, " + std::to_string(f.static_shared) +
                   " of them static)");
    }
    driver_.check(driver_.api().cuFuncSetAttribute(
                      f.handle,
                      static_cast<cuda::CuFunctionAttribute>(cuda::FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES),
                      static_cast<int>(shared)),
                  "cuFuncSetAttribute", "kernel " + std::string(kernel));
    f.max_dynamic_shared = static_cast<int>(shared);
}

void UserModules::launch(std::string_view kernel, const LaunchConfig& launch, const TaskArgs& args,
                         std::span<const std::uint64_t> device_bases, cuda::CuStream stream) {
    try {
        validate_module_kernel_name(kernel);
        validate_module_launch(launch, args.tensors.size(), args.scalars.size());
    } catch (const WireError& e) {
        refuse(ErrorCode::BAD_REQUEST, kernel, e.what());
    }
    const auto it = modules_.find(std::string(module_of(kernel)));
    if (it == modules_.end()) {
        refuse(ErrorCode::UNKNOWN_KERNEL, kernel,
               "no module " + std::string(module_of(kernel)) + " is loaded on cuda chip " + path_);
    }
    Function& f = function(kernel, it->second);
    check_limits(kernel, launch, f);
    const std::size_t count = args.tensors.size() + args.scalars.size();
    std::size_t tensor = 0;
    std::size_t scalar = 0;
    for (std::size_t i = 0; i < count; ++i) {
        std::uint64_t& slot = values_[i];
        slot = 0;
        if ((launch.scalar_slots >> i & 1u) == 0) {
            slot = device_bases[tensor] + args.tensors[tensor].tensor.byte_offset;
            ++tensor;
        } else {
            const ScalarArg& s = args.scalars[scalar++];
            if (s.kind == ScalarKind::FLOAT32) {
                const float v = s.as_f32();
                std::memcpy(&slot, &v, sizeof v);
            } else if (s.kind == ScalarKind::FLOAT64) {
                const double v = s.as_f64();
                std::memcpy(&slot, &v, sizeof v);
            } else {
                const std::int64_t v = s.as_i64();
                std::memcpy(&slot, &v, sizeof v);
            }
        }
        params_[i] = &slot;
    }
    cuda::launch(driver_, f.handle, {launch.grid[0], launch.grid[1], launch.grid[2]},
                 {launch.block[0], launch.block[1], launch.block[2]}, launch.shared_bytes, stream,
                 count == 0 ? nullptr : params_.data());
}

} // namespace canopy::worker
