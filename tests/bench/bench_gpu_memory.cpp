// bench_gpu_memory: bandwidth through canopy's buffers on a GPU, against the plain CUDA allocations they stand
// in for, measured in the same run (medians of 31 transfers each):
//   device to device  2 GiB: a `copy` task between two CUDA_VMM buffers on a cuda chip (each made by the chip,
//                     exported as an fd, imported and mapped again)  vs  cuMemcpyDtoD between two cuMemAlloc
//                     allocations
//   host to device    256 MiB: a `copy` task from a POSIX_SHM buffer (registered once by the chip) into a CUDA_VMM
//   buffer
//                     vs  cuMemcpyHtoD from cuMemAllocHost memory into a cuMemAlloc allocation
//   copy kernel       256 MiB: canopy's copy kernel (int64 elements) over an imported VMM mapping  vs  over cuMemAlloc
//                     memory, in this process
//   copy engine       256 MiB: cuMemcpyDtoD from an imported VMM mapping  vs  from cuMemAlloc memory, in this process
// The canopy rows include a task's dispatch (about 20 microseconds), which is why the device-to-device copy, at
// nearly 2 TB/s, moves 2 GiB: 1 ms of transfer against the dispatch. The
// supervisor and its chip run first, then this process initializes CUDA for the baselines (a process that
// initialized CUDA must not fork workers). Without a GPU it prints "skipped: ..." and exits 0.
#include "bench.h"
#include "cuda/context.h"
#include "cuda/memory.h"
#include "cuda/module.h"
#include "cuda/stream.h"
#include "cuda/vmm.h"
#include "daemon/supervisor.h"
#include "tests/cuda/gpu_probe.h"
#include "worker/cuda/fatbin.h"
#include "worker/cuda/launcher.h"

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

using namespace canopy;

namespace {

constexpr std::size_t BYTES = std::size_t{256} << 20;
constexpr std::size_t DEVICE_BYTES = std::size_t{2} << 30;

bench::Options transfer_options() {
    bench::Options o;
    o.samples = 31;
    return o;
}

double gbps(const bench::Result& r, std::size_t bytes) {
    return static_cast<double>(bytes) / r.median_ns;
}

void row(const char* what, std::size_t bytes, const bench::Result& canopy_result, const char* baseline,
         const bench::Result& base) {
    std::printf("| %s | %zu MiB | %.1f GB/s (%.3f ms) | %s: %.1f GB/s (%.3f ms) | %.1f %% |\n", what, bytes >> 20,
                gbps(canopy_result, bytes), canopy_result.median_ns / 1e6, baseline, gbps(base, bytes),
                base.median_ns / 1e6, 100.0 * base.median_ns / canopy_result.median_ns);
}

daemon::TaskRequest copy_task(const BufferDescriptor& in, const BufferDescriptor& out, std::size_t bytes) {
    const auto count = static_cast<std::uint32_t>(bytes / 8); // int64 elements
    daemon::TaskRequest r;
    r.kernel = "copy";
    r.worker = "chip0";
    r.args.tensors.push_back({make_tensor(in, DataType::INT64, {count}), TensorTag::INPUT});
    r.args.tensors.push_back({make_tensor(out, DataType::INT64, {count}), TensorTag::OUTPUT});
    return r;
}

bench::Result through_canopy(daemon::Supervisor& sup, const BufferDescriptor& in, const BufferDescriptor& out,
                             std::size_t bytes) {
    return bench::measure(
        [&] {
            const auto r = sup.run(copy_task(in, out, bytes));
            if (!r.ok()) {
                std::fprintf(stderr, "copy task failed: %s\n", r.message.c_str());
                std::exit(1);
            }
        },
        transfer_options());
}

} // namespace

int main() {
    const auto& probe = testing::gpu_probe();
    if (probe.devices < 1) {
        std::printf("skipped: no GPU (%s)\n", probe.devices < 0 ? probe.why.c_str() : "the CUDA driver sees no device");
        return 0;
    }
    const auto state = std::filesystem::temp_directory_path() / ("canopy-bench-gpu-" + std::to_string(::getpid()));
    std::filesystem::create_directories(state);
    bench::Result vmm_copy{};
    bench::Result shm_to_vmm{};
    {
        daemon::SupervisorOptions o;
        o.name = "bench";
        o.path = "/";
        o.state_dir = state;
        o.children.push_back({"chip0", daemon::ChildKind::CUDA_CHIP, 0, {}, {}});
        daemon::Supervisor sup(o);
        sup.start();
        const auto a = sup.create_buffer({DEVICE_BYTES, Backend::CUDA_VMM, Access::READWRITE, "chip0", {}});
        const auto b = sup.create_buffer({DEVICE_BYTES, Backend::CUDA_VMM, Access::READWRITE, "chip0", {}});
        const auto host = sup.create_buffer({BYTES, Backend::POSIX_SHM, Access::READWRITE, "", {}});
        vmm_copy = through_canopy(sup, a, b, DEVICE_BYTES);
        shm_to_vmm = through_canopy(sup, host, b, BYTES);
        sup.stop();
    }
    std::filesystem::remove_all(state);

    const cuda::Driver& driver = cuda::Driver::get();
    cuda::PrimaryContext context(driver, 0);
    cuda::Stream stream(driver);
    const cuda::DeviceAllocation x(driver, DEVICE_BYTES);
    const cuda::DeviceAllocation y(driver, DEVICE_BYTES);
    const auto dtod = bench::measure(
        [&] {
            CANOPY_CU(driver, cuMemcpyAsync, y.get(), x.get(), DEVICE_BYTES, stream.get());
            stream.synchronize();
        },
        transfer_options());
    void* pinned = nullptr;
    CANOPY_CU(driver, cuMemAllocHost, &pinned, BYTES);
    const auto htod = bench::measure(
        [&] {
            CANOPY_CU(driver, cuMemcpyHtoDAsync, y.get(), pinned, BYTES, stream.get());
            stream.synchronize();
        },
        transfer_options());
    CANOPY_CU(driver, cuMemFreeHost, pinned);

    // The copy kernel over an imported mapping vs over cuMemAlloc memory.
    const cuda::Module module(driver, worker::kernel_image());
    const worker::Launcher launcher(driver, module);
    const std::size_t padded = cuda::vmm_padded_size(driver, 0, BYTES);
    const auto made = cuda::VmmAllocation::create(driver, 0, padded);
    const int fd = made.export_fd();
    const auto imported = cuda::VmmAllocation::import_fd(driver, fd);
    ::close(fd);
    const cuda::VmmMapping mapping(driver, imported, padded, 0, true);
    CanonicalIdentity id{};
    id.owner_instance = draw_owner_instance();
    id.buffer_id = 1;
    id.generation = 1;
    const auto d = make_vmm_descriptor(Backend::CUDA_VMM, id, BYTES, Access::READWRITE, 0);
    const Tensor whole = make_tensor(d, DataType::INT64, {static_cast<std::uint32_t>(BYTES / 8)});
    const std::vector<kernels::BoundTensor> bound{{&whole, TensorTag::INPUT, nullptr},
                                                  {&whole, TensorTag::OUTPUT, nullptr}};
    const kernels::KernelCall call{"copy", bound, {}, nullptr};
    auto kernel_copy = [&](std::uint64_t from, std::uint64_t to) {
        const std::vector<std::uint64_t> bases{from, to};
        return bench::measure(
            [&] {
                launcher.launch(call, bases, stream.get());
                stream.synchronize();
            },
            transfer_options());
    };
    const auto kernel_vmm = kernel_copy(mapping.address(), y.get());
    const auto kernel_alloc = kernel_copy(x.get(), y.get());
    auto engine_copy = [&](std::uint64_t from, std::uint64_t to) {
        return bench::measure(
            [&] {
                CANOPY_CU(driver, cuMemcpyAsync, to, from, BYTES, stream.get());
                stream.synchronize();
            },
            transfer_options());
    };
    const auto engine_vmm = engine_copy(mapping.address(), y.get());
    const auto engine_alloc = engine_copy(x.get(), y.get());

    std::printf("| transfer | size | canopy | baseline (same run) | canopy vs baseline |\n|---|---|---|---|---|\n");
    row("device to device: copy task, CUDA_VMM to CUDA_VMM", DEVICE_BYTES, vmm_copy, "cuMemcpyDtoD, cuMemAlloc", dtod);
    row("host to device: copy task, POSIX_SHM to CUDA_VMM", BYTES, shm_to_vmm, "cuMemcpyHtoD, cuMemAllocHost", htod);
    row("copy kernel: imported VMM mapping to cuMemAlloc", BYTES, kernel_vmm, "cuMemAlloc to cuMemAlloc", kernel_alloc);
    row("copy engine: imported VMM mapping to cuMemAlloc", BYTES, engine_vmm, "cuMemAlloc to cuMemAlloc", engine_alloc);
    return 0;
}
