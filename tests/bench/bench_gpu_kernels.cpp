// bench_gpu_kernels: canopy's matmul and reduce_sum on a cuda chip against torch on the same GPU, in the same
// run (docs/performance.md):
//   matmul float32 4096 x 4096 x 4096 (no TF32), matmul bfloat16 8192 x 8192 x 8192, reduce_sum float32 of 2^26
// canopy: Supervisor::run of the task on a cuda chip (one process per chip), over CUDA_VMM buffers the chip made,
//         filled with random values through a POSIX_SHM buffer and a copy task; the wall time of each call (submit
//         to result, the chip's launch and stream synchronize included) and the chip's own start..end time.
// torch:  the same shapes on random tensors (python3 with torch, TF32 off for float32): the wall time of each call
//         followed by torch.cuda.synchronize(), and the GPU time between two CUDA events around the call.
// Each is 3 warm-up calls, then CALLS timed ones; the table gives medians. The targets compare canopy's wall time
// with torch's event time, the stricter of the two baselines: matmul float32 >= 90 %, bfloat16 >= 85 % of torch's
// TFLOP/s, reduce_sum >= 80 % of torch.sum's bandwidth. Without a GPU it prints "skipped: ..." and exits 0;
// without torch it prints canopy's figures alone. CANOPY_BENCH_PYTHON names the interpreter (default python3).
#include "bench.h"
#include "daemon/supervisor.h"
#include "ipc/mapped_region.h"
#include "ipc/sys_error.h"
#include "tests/cuda/gpu_probe.h"
#include "torch_baseline.h"
#include "worker/kernels/half.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <map>
#include <random>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

using namespace canopy;

namespace {

using Clock = std::chrono::steady_clock;

struct Case {
    std::string name; // as the torch script prints it
    std::string what;
    DataType dtype;
    std::uint32_t n; // matmul: n x n x n; reduce_sum: elements
    bool matmul;
    int calls;
    double target; // fraction of torch's rate
    double work() const {
        return matmul ? 2.0 * n * n * static_cast<double>(n) : static_cast<double>(n) * element_size(dtype);
    }
};

const std::vector<Case> CASES{
    {"matmul_fp32", "matmul float32 4096^3 (TF32 off)", DataType::FLOAT32, 4096, true, 20, 0.90},
    {"matmul_bf16", "matmul bfloat16 8192^3", DataType::BFLOAT16, 8192, true, 20, 0.85},
    {"reduce_fp32", "reduce_sum float32 2^26", DataType::FLOAT32, 1u << 26, false, 200, 0.80},
};

// The cases, after torch_baseline.h's prelude.
const char* TORCH_CASES = R"(
a = torch.randn(4096, 4096, device='cuda')
b = torch.randn(4096, 4096, device='cuda')
bench('matmul_fp32', lambda: a @ b, 20)
a = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
b = torch.randn(8192, 8192, device='cuda', dtype=torch.bfloat16)
bench('matmul_bf16', lambda: a @ b, 20)
del a, b
x = torch.randn(1 << 26, device='cuda')
bench('reduce_fp32', lambda: x.sum(), 200)
)";

using bench::Timing;

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

// Random values in [-1, 1) of `dtype` (float32 or bfloat16) written into a POSIX_SHM buffer, then copied into `to`.
void fill_random(daemon::Supervisor& sup, const BufferDescriptor& to, DataType dtype, std::uint64_t count,
                 std::uint64_t seed) {
    const std::uint64_t bytes = count * element_size(dtype);
    const auto staging = sup.create_buffer({bytes, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    {
        const std::string path = "/" + std::string(shm_name(staging));
        const int fd = ipc::sys_check(::shm_open(path.c_str(), O_RDWR | O_CLOEXEC, 0), "shm_open");
        auto map = ipc::MappedRegion::map_shared(fd, bytes, true);
        ::close(fd);
        std::mt19937_64 rng(seed);
        for (std::uint64_t i = 0; i < count; ++i) {
            const float v = static_cast<float>(static_cast<std::int64_t>(rng() >> 40) - (1 << 23)) / (1 << 23);
            if (dtype == DataType::BFLOAT16) {
                const std::uint16_t h = kernels::float_to_bfloat16(v);
                std::memcpy(map.data() + 2 * i, &h, 2);
            } else {
                std::memcpy(map.data() + 4 * i, &v, 4);
            }
        }
    }
    const auto n = static_cast<std::uint32_t>(count);
    daemon::TaskRequest copy;
    copy.kernel = "copy";
    copy.worker = "chip0";
    copy.args.tensors.push_back({make_tensor(staging, dtype, {n}), TensorTag::INPUT});
    copy.args.tensors.push_back({make_tensor(to, dtype, {n}), TensorTag::OUTPUT});
    const auto r = sup.run(copy);
    if (!r.ok()) {
        std::fprintf(stderr, "bench_gpu_kernels: filling a buffer failed: %s\n", r.message.c_str());
        std::exit(1);
    }
    (void)sup.release_buffer(staging.identity);
}

BufferDescriptor device_buffer(daemon::Supervisor& sup, std::uint64_t bytes) {
    return sup.create_buffer({bytes, Backend::CUDA_VMM, Access::READWRITE, "chip0", {}});
}

Timing run_canopy(daemon::Supervisor& sup, const Case& c) {
    std::vector<BufferDescriptor> made;
    daemon::TaskRequest r;
    r.worker = "chip0";
    if (c.matmul) {
        const std::uint64_t bytes = std::uint64_t{c.n} * c.n * element_size(c.dtype);
        for (int i = 0; i < 3; ++i) {
            made.push_back(device_buffer(sup, bytes));
        }
        fill_random(sup, made[0], c.dtype, std::uint64_t{c.n} * c.n, 1);
        fill_random(sup, made[1], c.dtype, std::uint64_t{c.n} * c.n, 2);
        r.kernel = "matmul";
        r.args.tensors.push_back({make_tensor(made[0], c.dtype, {c.n, c.n}), TensorTag::INPUT});
        r.args.tensors.push_back({make_tensor(made[1], c.dtype, {c.n, c.n}), TensorTag::INPUT});
        r.args.tensors.push_back({make_tensor(made[2], c.dtype, {c.n, c.n}), TensorTag::OUTPUT});
    } else {
        made.push_back(device_buffer(sup, std::uint64_t{c.n} * element_size(c.dtype)));
        made.push_back(device_buffer(sup, 4096));
        fill_random(sup, made[0], c.dtype, c.n, 3);
        r.kernel = "reduce_sum";
        r.args.tensors.push_back({make_tensor(made[0], c.dtype, {c.n}), TensorTag::INPUT});
        r.args.tensors.push_back({make_tensor(made[1], c.dtype, {1}), TensorTag::OUTPUT});
    }
    std::vector<double> walls;
    std::vector<double> inner;
    for (int i = 0; i < 3 + c.calls; ++i) {
        const auto start = Clock::now();
        const auto result = sup.run(r);
        const double ms = std::chrono::duration<double, std::milli>(Clock::now() - start).count();
        if (!result.ok()) {
            std::fprintf(stderr, "bench_gpu_kernels: %s failed: %s\n", c.what.c_str(), result.message.c_str());
            std::exit(1);
        }
        if (i >= 3) {
            walls.push_back(ms);
            inner.push_back(static_cast<double>(result.end_ns - result.start_ns) / 1e6);
        }
    }
    for (const auto& d : made) {
        (void)sup.release_buffer(d.identity);
    }
    return {median(walls), median(inner)};
}

// TFLOP/s for matmul, GB/s for reduce_sum.
double rate(const Case& c, double ms) {
    return c.matmul ? c.work() / (ms * 1e9) : c.work() / (ms * 1e6);
}

} // namespace

int main() {
    const auto& probe = testing::gpu_probe();
    if (probe.devices < 1) {
        std::printf("bench_gpu_kernels: skipped: no GPU (%s)\n", probe.devices < 0 ? probe.why.c_str() : "0 visible");
        return 0;
    }
    std::string torch_version;
    const std::map<std::string, Timing> torch = bench::run_torch(TORCH_CASES, torch_version);
    std::printf("bench_gpu_kernels: %s\n",
                torch.empty() ? "torch not available (canopy alone)" : torch_version.c_str());
    const auto state = std::filesystem::temp_directory_path() / ("canopy-bench-kernels-" + std::to_string(::getpid()));
    std::filesystem::create_directories(state);
    std::map<std::string, Timing> canopy;
    {
        daemon::SupervisorOptions o;
        o.name = "bench";
        o.path = "/";
        o.state_dir = state;
        o.children.push_back({"chip0", daemon::ChildKind::CUDA_CHIP, 0, {}, {}});
        daemon::Supervisor sup(o);
        sup.start();
        for (const Case& c : CASES) {
            canopy[c.name] = run_canopy(sup, c);
        }
        sup.stop();
    }
    std::filesystem::remove_all(state);

    std::printf("\n| work | canopy wall (chip) | canopy rate | torch wall (events) | torch rate (events) | canopy / "
                "torch events | canopy / torch wall | target |\n|---|---:|---:|---:|---:|---:|---:|---|\n");
    int rc = 0;
    for (const Case& c : CASES) {
        const Timing& ours = canopy[c.name];
        const char* unit = c.matmul ? "TFLOP/s" : "GB/s";
        const auto it = torch.find(c.name);
        if (it == torch.end()) {
            std::printf("| %s | %.3f ms (%.3f ms) | %.1f %s | - | - | - | - | %.0f %% of torch: not measured |\n",
                        c.what.c_str(), ours.wall_ms, ours.inner_ms, rate(c, ours.wall_ms), unit, c.target * 100);
            continue;
        }
        const Timing& base = it->second;
        const double strict = base.inner_ms / ours.wall_ms;
        const double like = base.wall_ms / ours.wall_ms;
        const bool met = strict >= c.target;
        std::printf(
            "| %s | %.3f ms (%.3f ms) | %.1f %s | %.3f ms (%.3f ms) | %.1f %s | %.1f %% | %.1f %% | >= %.0f %%: "
            "%s |\n",
            c.what.c_str(), ours.wall_ms, ours.inner_ms, rate(c, ours.wall_ms), unit, base.wall_ms, base.inner_ms,
            rate(c, base.inner_ms), unit, strict * 100, like * 100, c.target * 100, met ? "met" : "missed");
    }
    return rc;
}
