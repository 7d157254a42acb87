// bench_gpu_dispatch: what canopy adds to running a GPU kernel (docs/performance.md).
//   direct launch   baseline: the empty kernel of tests/cuda/user_module.cu loaded in this process and launched
//                   with cuLaunchKernel + cuStreamSynchronize through canopy's cuda/ wrappers
//   canopy module   the same kernel as a module task (bench:empty, loaded with Supervisor::load_module):
//                   Supervisor::run on a cuda chip, one process per chip, from submit to the result
//   canopy sleep_ms(0)  the dispatch path alone on the same cuda chip (a built-in that runs on its CPU)
// Each is timed call by call: 200 warm-up calls, then 2000 timed ones; the table gives median and p10-p90 per
// call and the ratio to the baseline, then where a canopy task's time goes by the times its result carries, and
// last the median canopy adds against the target of 10 us.
// The supervisor (and its zygote) starts before this process initializes CUDA, as a forked process cannot use
// a CUDA context of its parent. Without a GPU, or in a build without the CUDA Toolkit, it prints a "skipped:"
// line and exits 0.
#include "bench.h"
#include "cuda/context.h"
#include "cuda/module.h"
#include "cuda/stream.h"
#include "daemon/supervisor.h"
#include "tests/cuda/gpu_probe.h"
#include "tests/cuda/user_module.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <sys/wait.h>
#include <unistd.h>
#include <vector>

using namespace canopy;

namespace {

using Clock = std::chrono::steady_clock;

constexpr int WARM_UP = 200;
constexpr int CALLS = 2000;
constexpr double TARGET_ADDED_US = 10.0;

// Median and p10/p90 of per-call times; `call` runs once per sample.
template <class F>
bench::Result per_call(F&& call) {
    for (int i = 0; i < WARM_UP; ++i) {
        call();
    }
    std::vector<double> ns(CALLS);
    for (double& sample : ns) {
        const auto start = Clock::now();
        call();
        sample =
            static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
    }
    std::sort(ns.begin(), ns.end());
    return {bench::detail::percentile(ns, 50), bench::detail::percentile(ns, 10), bench::detail::percentile(ns, 90), 1,
            ns.size()};
}

std::uint64_t now_ns() {
    return static_cast<std::uint64_t>(
        std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now().time_since_epoch()).count());
}

// Where one task's time goes, from the times its result carries (the chip reads the same CLOCK_MONOTONIC as
// steady_clock): submit -> the chip starts it, the chip's start -> its end (the launch, the kernel and the event
// that reports it), the chip's end -> Supervisor::run returns. Each call only appends (the room is reserved); the
// medians are of the last CALLS tasks, those per_call times.
struct Hops {
    std::vector<double> in, chip, out;
    Hops() {
        for (auto* v : {&in, &chip, &out}) {
            v->reserve(WARM_UP + CALLS);
        }
    }
    void add(std::uint64_t sent, const daemon::TaskResult& r, std::uint64_t back) {
        in.push_back(static_cast<double>(r.start_ns) - static_cast<double>(sent));
        chip.push_back(static_cast<double>(r.end_ns) - static_cast<double>(r.start_ns));
        out.push_back(static_cast<double>(back) - static_cast<double>(r.end_ns));
    }
    void print(const char* what) const {
        const auto median_us = [](const std::vector<double>& all) {
            std::vector<double> timed(all.end() - std::min<std::ptrdiff_t>(CALLS, std::ssize(all)), all.end());
            std::sort(timed.begin(), timed.end());
            return bench::detail::percentile(timed, 50) / 1000.0;
        };
        std::printf("%s, median us per hop: submit->chip start %.2f, chip start->end %.2f, chip end->result %.2f\n",
                    what, median_us(in), median_us(chip), median_us(out));
    }
};

daemon::SupervisorOptions one_cuda_chip(const std::filesystem::path& state) {
    daemon::SupervisorOptions o;
    o.name = "bench";
    o.path = "/";
    o.state_dir = state;
    o.children.push_back({"chip0", daemon::ChildKind::CUDA_CHIP, 0, {}, {}});
    return o;
}

void require_ok(const daemon::TaskResult& r) {
    if (!r.ok()) {
        std::fprintf(stderr, "bench_gpu_dispatch: task failed: %s: %s\n", std::string(error_code_name(r.code)).c_str(),
                     r.message.c_str());
        std::exit(1);
    }
}

} // namespace

int main() {
    if (testing::user_module_ptx().empty()) {
        std::printf("bench_gpu_dispatch: skipped: no GPU kernels (built without the CUDA Toolkit)\n");
        return 0;
    }
    const auto& probe = testing::gpu_probe();
    const int gpus = probe.devices;
    const std::string& why = probe.why;
    if (gpus < 1) {
        std::printf("bench_gpu_dispatch: skipped: no GPU (%s)\n", gpus < 0 ? why.c_str() : "0 visible");
        return 0;
    }
    char tmpl[] = "/tmp/canopy-bench-gpu-XXXXXX";
    const std::filesystem::path state = ::mkdtemp(tmpl);
    std::printf("bench_gpu_dispatch: %d GPU(s), %d CPUs online; %d calls after %d warm-up calls each\n\n", gpus,
                static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)), CALLS, WARM_UP);
    int rc = 0;
    {
        daemon::Supervisor sup(one_cuda_chip(state));
        sup.start();
        (void)sup.load_module("bench", testing::user_module_image());
        daemon::TaskRequest module_task;
        module_task.kernel = "bench:empty";
        module_task.worker = "chip0";
        module_task.launch = LaunchConfig{{1, 1, 1}, {1, 1, 1}, 0, 0};
        daemon::TaskRequest host_task;
        host_task.kernel = "sleep_ms";
        host_task.worker = "chip0";
        host_task.args.scalars.push_back(ScalarArg::i64(0));
        Hops module_hops;
        Hops host_hops;
        const auto timed = [&](const daemon::TaskRequest& task, Hops& hops) {
            const std::uint64_t sent = now_ns();
            const daemon::TaskResult r = sup.run(task);
            const std::uint64_t back = now_ns();
            require_ok(r);
            hops.add(sent, r, back);
        };
        const bench::Result canopy = per_call([&] { timed(module_task, module_hops); });
        const bench::Result dispatch = per_call([&] { timed(host_task, host_hops); });

        // The baseline, in this process, after the supervisor's zygote was forked.
        const cuda::Driver& driver = cuda::Driver::get();
        const cuda::PrimaryContext context(driver, 0);
        const cuda::Stream stream(driver);
        auto image = testing::user_module_image();
        image.push_back(std::byte{0});
        const cuda::Module module = cuda::Module::load_logged(driver, image, "module bench");
        const cuda::CuFunction empty = module.function("empty");
        const bench::Result direct = per_call([&] {
            cuda::launch(driver, empty, {1, 1, 1}, {1, 1, 1}, 0, stream.get(), nullptr);
            stream.synchronize();
        });

        bench::print_header();
        bench::print_row("direct launch + sync (this process)", direct, "direct launch", direct);
        bench::print_row("canopy module task bench:empty (Supervisor::run)", canopy, "direct launch", direct);
        bench::print_row("canopy sleep_ms(0) on the cuda chip (dispatch only)", dispatch, "direct launch", direct);
        std::printf("\n");
        module_hops.print("bench:empty");
        host_hops.print("sleep_ms(0)");
        const double added_us = (canopy.median_ns - direct.median_ns) / 1000.0;
        std::printf("\ndirect median %.2f us, canopy median %.2f us: canopy adds %.2f us at the median\n",
                    direct.median_ns / 1000.0, canopy.median_ns / 1000.0, added_us);
        std::printf("target added <= %.0f us at the median: %s\n", TARGET_ADDED_US,
                    added_us <= TARGET_ADDED_US ? "met" : "missed");
        sup.stop();
    }
    std::filesystem::remove_all(state);
    return rc;
}
