#include "cuda/module.h"

#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <utility>
#include <vector>

namespace canopy::cuda {

Module::Module(const Driver& driver, std::span<const std::byte> image) : driver_(&driver) {
    if (image.empty()) {
        throw std::invalid_argument("cuModuleLoadData: the module image is empty");
    }
    CANOPY_CU(driver, cuModuleLoadData, &module_, image.data());
}

Module::Module(Module&& other) noexcept : driver_(other.driver_), module_(std::exchange(other.module_, nullptr)) {}

Module& Module::operator=(Module&& other) noexcept {
    if (this != &other) {
        reset();
        driver_ = other.driver_;
        module_ = std::exchange(other.module_, nullptr);
    }
    return *this;
}

Module Module::load_logged(const Driver& driver, std::span<const std::byte> image, const std::string& what) {
    if (image.empty()) {
        throw std::invalid_argument("cuModuleLoadDataEx: the image of " + what + " is empty");
    }
    std::vector<char> error_log(JIT_LOG_BYTES + 1, '\0');
    std::vector<char> info_log(JIT_LOG_BYTES + 1, '\0');
    CuJitOption options[] = {
        static_cast<CuJitOption>(JIT_ERROR_LOG_BUFFER), static_cast<CuJitOption>(JIT_ERROR_LOG_BUFFER_SIZE_BYTES),
        static_cast<CuJitOption>(JIT_INFO_LOG_BUFFER), static_cast<CuJitOption>(JIT_INFO_LOG_BUFFER_SIZE_BYTES)};
    // Sizes travel in the pointer-sized option values themselves (the driver's convention).
    void* values[] = {error_log.data(), reinterpret_cast<void*>(std::uintptr_t{JIT_LOG_BYTES}), info_log.data(),
                      reinterpret_cast<void*>(std::uintptr_t{JIT_LOG_BYTES})};
    CuModule module = nullptr;
    const CuResult result = driver.api().cuModuleLoadDataEx(&module, image.data(), 4, options, values);
    if (result != 0) {
        std::string log(error_log.data(), ::strnlen(error_log.data(), JIT_LOG_BYTES));
        while (!log.empty() && (log.back() == '\n' || log.back() == ' ')) {
            log.pop_back();
        }
        for (auto at = log.find('\n'); at != std::string::npos; at = log.find('\n', at)) {
            log.replace(at, 1, " | ");
        }
        driver.check(result, "cuModuleLoadDataEx", what + (log.empty() ? "" : "; JIT log: " + log));
    }
    return Module(driver, module);
}

CuFunction Module::function(const std::string& name) const {
    CuFunction f = nullptr;
    driver_->check(driver_->api().cuModuleGetFunction(&f, module_, name.c_str()), "cuModuleGetFunction",
                   "kernel '" + name + "'");
    return f;
}

void Module::reset() noexcept {
    if (module_ != nullptr) {
        (void)driver_->api().cuModuleUnload(module_);
        module_ = nullptr;
    }
}

void launch(const Driver& driver, CuFunction function, Dim3 grid, Dim3 block, unsigned int shared_bytes,
            CuStream stream, void** params) {
    CANOPY_CU(driver, cuLaunchKernel, function, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes, stream,
              params, nullptr);
}

} // namespace canopy::cuda
