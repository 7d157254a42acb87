#pragma once
// Launcher: runs the built-in kernels of a cuda chip on its GPU. It looks up every kernel of the embedded
// module once (a missing one fails the construction, so a chip never starts half-equipped), then turns a
// checked KernelCall into launches on a stream: views become DeviceViews over the device addresses of their
// buffers, scalars are converted to the dtype on the host with the CPU kernels' own conversions (so fill,
// scale and axpy see exactly the CPU's value), and the grid is sized to the view.
//
// Kernels on the GPU: fill, iota, copy, scale, axpy, reduce_sum, matmul (runs_on_device()); peer_read and
// allgather through launch_peer(); illegal_address through launch_illegal_address(). The rest of the built-ins touch no
// buffer memory or are not served here.
//
// fill, iota, copy, scale and axpy run on their _vector entry points (16-byte loads and stores) when the written
// view is contiguous, else on the strided ones, as plan_elementwise (elementwise_plan.h) decides; both give the
// same bits.
//
// matmul goes to cuBLASLt (LtMatmul) when the Launcher was given one and it takes the call; otherwise, and always
// for a Launcher without one, canopy's tiled kernel runs it, with the CPU's bits. reduce_sum is a two-pass tree
// (reduce.cuh), with 16-byte loads for contiguous views.
//
// Ownership: borrows the driver, the module and the LtMatmul, which must outlive it; owns a small device
// allocation for reduce_sum's partial sums. REQUIRES the module's context to be current on the calling thread.
// Thread safety: one caller at a time (the scratch allocation is shared by launches).

#include "cuda/memory.h"
#include "cuda/module.h"
#include "worker/cuda/lt_matmul.h"
#include "worker/kernels/builtin.h"

#include <array>
#include <cstdint>
#include <span>
#include <string_view>

namespace canopy::worker {

class Launcher {
public:
    // `lt` may be null: matmul then always runs on the tiled kernel.
    Launcher(const cuda::Driver& driver, const cuda::Module& module, LtMatmul* lt = nullptr);

    // Whether the built-in `kernel` runs as a CUDA kernel here.
    static bool runs_on_device(std::string_view kernel) noexcept;

    // Queues the kernel(s) of `call` on `stream`; returns without waiting. REQUIRES: runs_on_device(call.name),
    // the call passed check_builtin for a chip (its launch flags included), and device_bases[i] is the device
    // address of byte 0 of call.tensors[i]'s buffer, which covers the buffer's nbytes. Throws CudaError.
    void launch(const kernels::KernelCall& call, std::span<const std::uint64_t> device_bases,
                cuda::CuStream stream) const;

    // Queues peer_read or allgather over a symmetric buffer whose device peer table at `table` has `world`
    // entries; clears the PE error flag first. `device_bases` as for launch(). The pe of peer_read is passed to
    // the device as given (a value outside [0, 2^32) as 2^32-1), where it is checked before any access.
    // Throws CudaError.
    void launch_peer(const kernels::KernelCall& call, std::span<const std::uint64_t> device_bases, std::uint64_t table,
                     std::uint32_t world, cuda::CuStream stream) const;
    // After the stream of a launch_peer synchronized: whether a kernel found a rank outside the world (and
    // accessed nothing for it). Throws CudaError.
    bool peer_error() const;

    // Queues canopy_illegal_address, which faults with CUDA_ERROR_ILLEGAL_ADDRESS (sticky).
    void launch_illegal_address(cuda::CuStream stream) const;

    // Queues canopy_noop (an empty kernel).
    void launch_noop(cuda::CuStream stream) const;

private:
    // The entry points of the module, per dtype.
    // FILL..AXPY take any views; FILL_VECTOR..AXPY_VECTOR (the same order) a vectorizable written view.
    enum class Kernel : std::uint8_t {
        FILL,
        IOTA,
        COPY,
        SCALE,
        AXPY,
        FILL_VECTOR,
        IOTA_VECTOR,
        COPY_VECTOR,
        SCALE_VECTOR,
        AXPY_VECTOR,
        REDUCE_PARTIAL,
        REDUCE_DENSE,
        REDUCE_FINISH,
        MATMUL
    };
    static constexpr std::size_t KERNEL_COUNT = 14;
    static constexpr std::size_t KERNEL_VECTOR_STEP = 5; // from each strided entry point to its _vector twin
    static_assert(static_cast<std::size_t>(Kernel::FILL_VECTOR) ==
                      static_cast<std::size_t>(Kernel::FILL) + KERNEL_VECTOR_STEP &&
                  static_cast<std::size_t>(Kernel::AXPY_VECTOR) ==
                      static_cast<std::size_t>(Kernel::AXPY) + KERNEL_VECTOR_STEP);
    static constexpr std::size_t DTYPE_SLOTS = 10; // indexed by DataType's raw value, 1..9

    cuda::CuFunction function(Kernel kernel, DataType dtype) const;
    void elementwise(Kernel kernel, const kernels::KernelCall& call, std::span<const std::uint64_t> bases,
                     cuda::CuStream stream) const;
    void reduce_sum(const kernels::KernelCall& call, std::span<const std::uint64_t> bases, cuda::CuStream stream) const;
    void matmul(const kernels::KernelCall& call, std::span<const std::uint64_t> bases, cuda::CuStream stream) const;
    template <class Params>
    void run(cuda::CuFunction function, cuda::Dim3 grid, cuda::Dim3 block, cuda::CuStream stream, Params params) const;

    const cuda::Driver* driver_;
    LtMatmul* lt_;
    std::array<std::array<cuda::CuFunction, DTYPE_SLOTS>, KERNEL_COUNT> functions_{};
    std::array<cuda::CuFunction, 4> peer_read_{}; // by log2 of the element size
    std::array<cuda::CuFunction, 4> allgather_{};
    cuda::CuFunction illegal_address_ = nullptr;
    cuda::CuFunction noop_ = nullptr;
    cuda::DeviceAllocation partials_;
    cuda::DeviceAllocation pe_error_; // one uint32 flag the peer kernels raise
};

} // namespace canopy::worker
