#include "cuda/module.h"

#include <stdexcept>
#include <utility>

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
