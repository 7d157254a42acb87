#include "worker/cuda/launcher.h"

#include "worker/cuda/device_view.h"
#include "worker/cuda/elementwise_plan.h"
#include "worker/cuda/kernel_abi.h"
#include "worker/kernels/detail/element_ops.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <string>

namespace canopy::worker {
namespace {

using cuda_abi::DeviceView;

constexpr std::array<DataType, 9> ALL_DTYPES{DataType::FLOAT32, DataType::FLOAT16, DataType::BFLOAT16,
                                             DataType::FLOAT64, DataType::INT8,    DataType::UINT8,
                                             DataType::INT16,   DataType::INT32,   DataType::INT64};

// Grid-stride kernels never need more blocks than this to fill an H200 (132 SMs) many times over.
constexpr std::uint64_t MAX_ELEMENTWISE_BLOCKS = cuda_abi::ELEMENTWISE_GRID;
// CUDA's limit for gridDim.y, which matmul uses for rows of tiles.
constexpr std::uint64_t MAX_GRID_Y = 65535;

bool is_float(DataType t) noexcept {
    return t == DataType::FLOAT32 || t == DataType::FLOAT64 || t == DataType::FLOAT16 || t == DataType::BFLOAT16;
}

// The scalar converted to `dtype` by the CPU kernels' rule, as low-aligned bits.
std::uint64_t scalar_bits(DataType dtype, const ScalarArg& scalar) {
    return kernels::detail::visit_dtype(dtype, [&](auto ops) {
        using Ops = decltype(ops);
        const typename Ops::V value = Ops::from_scalar(scalar);
        std::uint64_t bits = 0;
        std::memcpy(&bits, &value, sizeof value);
        return bits;
    });
}

unsigned blocks_for(std::uint64_t count, std::uint64_t per_block, std::uint64_t most) {
    return static_cast<unsigned>(std::clamp<std::uint64_t>((count + per_block - 1) / per_block, 1, most));
}

const char* kernel_name(std::size_t kernel) {
    static constexpr std::array<const char*, 14> NAMES{
        "fill",        "iota",         "copy",        "scale",          "axpy",         "fill_vector",   "iota_vector",
        "copy_vector", "scale_vector", "axpy_vector", "reduce_partial", "reduce_dense", "reduce_finish", "matmul"};
    return NAMES.at(kernel);
}

// Which dtypes each kernel has an entry point for: matmul has float ones only, the rest every dtype.
bool has_entry(std::size_t kernel, DataType dtype) {
    return std::string_view(kernel_name(kernel)) != "matmul" || is_float(dtype);
}

// A view of one dimension whose stride is the element size: its elements are consecutive bytes.
bool is_dense(const cuda_abi::DeviceView& v) noexcept {
    return v.count <= 1 || (v.ndims == 1 && v.strides[0] == v.element_size);
}

} // namespace

Launcher::Launcher(const cuda::Driver& driver, const cuda::Module& module, LtMatmul* lt)
    : driver_(&driver), lt_(lt), partials_(driver, cuda_abi::REDUCE_MAX_PARTIALS * sizeof(std::uint64_t)),
      pe_error_(driver, sizeof(std::uint32_t)) {
    for (std::size_t k = 0; k < KERNEL_COUNT; ++k) {
        for (DataType dtype : ALL_DTYPES) {
            if (has_entry(k, dtype)) {
                functions_[k][static_cast<std::size_t>(dtype)] =
                    module.function(std::string("canopy_") + kernel_name(k) + "_" + to_string(dtype));
            }
        }
    }
    for (std::size_t i = 0; i < peer_read_.size(); ++i) {
        const std::string bytes = std::to_string(1u << i);
        peer_read_[i] = module.function("canopy_peer_read_b" + bytes);
        allgather_[i] = module.function("canopy_allgather_b" + bytes);
    }
    illegal_address_ = module.function("canopy_illegal_address");
    noop_ = module.function("canopy_noop");
}

bool Launcher::runs_on_device(std::string_view kernel) noexcept {
    return kernel == "fill" || kernel == "iota" || kernel == "copy" || kernel == "scale" || kernel == "axpy" ||
           kernel == "reduce_sum" || kernel == "matmul";
}

cuda::CuFunction Launcher::function(Kernel kernel, DataType dtype) const {
    return functions_[static_cast<std::size_t>(kernel)][static_cast<std::size_t>(dtype)];
}

template <class Params>
void Launcher::run(cuda::CuFunction function, cuda::Dim3 grid, cuda::Dim3 block, cuda::CuStream stream,
                   Params params) const {
    void* args[] = {&params};
    cuda::launch(*driver_, function, grid, block, 0, stream, args);
}

void Launcher::launch(const kernels::KernelCall& call, std::span<const std::uint64_t> bases,
                      cuda::CuStream stream) const {
    const std::string_view name = call.name;
    if (name == "reduce_sum") {
        reduce_sum(call, bases, stream);
    } else if (name == "matmul") {
        matmul(call, bases, stream);
    } else if (name == "fill") {
        elementwise(Kernel::FILL, call, bases, stream);
    } else if (name == "iota") {
        elementwise(Kernel::IOTA, call, bases, stream);
    } else if (name == "copy") {
        elementwise(Kernel::COPY, call, bases, stream);
    } else if (name == "scale") {
        elementwise(Kernel::SCALE, call, bases, stream);
    } else if (name == "axpy") {
        elementwise(Kernel::AXPY, call, bases, stream);
    } else {
        throw std::logic_error(std::string(name) + ": not a kernel the GPU runs");
    }
}

// fill, iota, scale: args[0] is the written view. copy and axpy: args[0] is read, args[1] written. `kernel` is the
// strided entry point; its _vector twin lies KERNEL_VECTOR_STEP further on.
void Launcher::elementwise(Kernel kernel, const kernels::KernelCall& call, std::span<const std::uint64_t> bases,
                           cuda::CuStream stream) const {
    cuda_abi::ElementwiseParams p{};
    const bool paired = kernel == Kernel::COPY || kernel == Kernel::AXPY;
    const Tensor& out = *call.tensors[paired ? 1 : 0].view;
    p.out = make_device_view(out, bases[paired ? 1 : 0]);
    if (paired) {
        p.in = make_device_view(*call.tensors[0].view, bases[0]);
    }
    if (!call.scalars.empty()) {
        p.scalar = scalar_bits(out.dtype, call.scalars[0]);
    }
    const ElementwisePlan plan = plan_elementwise(p.out);
    const Kernel entry =
        plan.vector ? static_cast<Kernel>(static_cast<std::size_t>(kernel) + KERNEL_VECTOR_STEP) : kernel;
    run(function(entry, out.dtype), {plan.blocks, 1, 1}, {cuda_abi::ELEMENTWISE_BLOCK, 1, 1}, stream, p);
}

void Launcher::reduce_sum(const kernels::KernelCall& call, std::span<const std::uint64_t> bases,
                          cuda::CuStream stream) const {
    const Tensor& x = *call.tensors[0].view;
    const Tensor& y = *call.tensors[1].view;
    cuda_abi::ReduceParams p{};
    p.x = make_device_view(x, bases[0]);
    // Every index of a one-element view is 0, so its element sits at byte_offset.
    p.y = bases[1] + y.byte_offset;
    p.partials = partials_.get();
    // The grid depends on the element count alone, so a task run again adds in the same order.
    const bool dense = is_dense(p.x);
    const std::uint64_t units = dense ? p.x.count / (16 / p.x.element_size) : p.x.count;
    p.partial_count =
        blocks_for(units, std::uint64_t{cuda_abi::REDUCE_BLOCK} * cuda_abi::REDUCE_UNROLL, cuda_abi::REDUCE_GRID);
    const cuda::Dim3 block{cuda_abi::REDUCE_BLOCK, 1, 1};
    run(function(dense ? Kernel::REDUCE_DENSE : Kernel::REDUCE_PARTIAL, x.dtype), {p.partial_count, 1, 1}, block,
        stream, p);
    run(function(Kernel::REDUCE_FINISH, x.dtype), {1, 1, 1}, block, stream, p);
}

void Launcher::matmul(const kernels::KernelCall& call, std::span<const std::uint64_t> bases,
                      cuda::CuStream stream) const {
    if (lt_ != nullptr && lt_->launch(call, bases, stream)) {
        return;
    }
    cuda_abi::MatmulParams p{};
    p.a = make_matrix_view(*call.tensors[0].view, bases[0]);
    p.b = make_matrix_view(*call.tensors[1].view, bases[1]);
    p.c = make_matrix_view(*call.tensors[2].view, bases[2]);
    constexpr unsigned T = cuda_abi::MATMUL_TILE;
    const cuda::Dim3 grid{blocks_for(p.b.cols, T, MAX_ELEMENTWISE_BLOCKS), blocks_for(p.a.rows, T, MAX_GRID_Y), 1};
    run(function(Kernel::MATMUL, call.tensors[0].view->dtype), grid, {T, T, 1}, stream, p);
}

void Launcher::launch_peer(const kernels::KernelCall& call, std::span<const std::uint64_t> bases, std::uint64_t table,
                           std::uint32_t world, cuda::CuStream stream) const {
    const bool read = call.name == "peer_read";
    cuda_abi::PeerParams p{};
    // The source view relative to the start of a copy: the kernel adds each rank's base.
    p.src = make_device_view(*call.tensors[0].view, 0);
    p.out = make_device_view(*call.tensors[1].view, bases[1]);
    p.table = table;
    p.error = pe_error_.get();
    p.world = world;
    if (read) {
        const std::int64_t pe = call.scalars[0].as_i64();
        p.pe = pe < 0 || pe > static_cast<std::int64_t>(UINT32_MAX) ? UINT32_MAX : static_cast<std::uint32_t>(pe);
    }
    const std::uint32_t size = p.src.element_size;
    const std::size_t slot = size == 1 ? 0 : size == 2 ? 1 : size == 4 ? 2 : 3;
    CANOPY_CU(*driver_, cuMemsetD8Async, pe_error_.get(), 0, sizeof(std::uint32_t), stream);
    const unsigned blocks = blocks_for(p.out.count, cuda_abi::ELEMENTWISE_BLOCK, MAX_ELEMENTWISE_BLOCKS);
    run(read ? peer_read_[slot] : allgather_[slot], {blocks, 1, 1}, {cuda_abi::ELEMENTWISE_BLOCK, 1, 1}, stream, p);
}

bool Launcher::peer_error() const {
    std::uint32_t flag = 0;
    pe_error_.copy_to_host(&flag, sizeof flag);
    return flag != 0;
}

void Launcher::launch_illegal_address(cuda::CuStream stream) const {
    // The first page of the address space is never mapped on the device.
    run(illegal_address_, {1, 1, 1}, {1, 1, 1}, stream, cuda_abi::FaultParams{8});
}

void Launcher::launch_noop(cuda::CuStream stream) const {
    cuda::launch(*driver_, noop_, {1, 1, 1}, {1, 1, 1}, 0, stream, nullptr);
}

} // namespace canopy::worker
