#pragma once
// torch on the same GPU as a same-run baseline for the GPU benchmarks. run_torch writes TORCH_PRELUDE followed by
// the benchmark's own lines to a temporary script and runs it with python3 (CANOPY_BENCH_PYTHON names another
// interpreter) as a subprocess, which ends before the call returns. The prelude turns TF32 off and defines
//   bench(name, f, n)         3 warm-up calls of f, then n timed calls, each followed by torch.cuda.synchronize();
//                             prints "name WALL_MS EVENT_MS": the medians of the wall time of one call and of the GPU
//                             time between two CUDA events around it
//   bench_queued(name, f, n)  n calls of f queued back to back and one synchronize, 5 times; prints the medians of
//                             the whole loop's wall and event time divided by n, in the same form
// and the script's last line prints "torch VERSION cuda VERSION DEVICE". Other lines of the script's output are
// echoed with a "torch: " prefix (errors, a missing torch).
//
// Call it before the benchmark starts any thread or initializes CUDA: it forks.
// Thread safety: one call at a time.

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <unistd.h>

namespace canopy::bench {

struct Timing {
    double wall_ms = 0;  // median per call
    double inner_ms = 0; // canopy: the chip's start..end of the task; torch: CUDA events
};

inline constexpr const char* TORCH_PRELUDE = R"(
import statistics, sys, time
import torch
torch.backends.cuda.matmul.allow_tf32 = False
torch.backends.cudnn.allow_tf32 = False
torch.set_float32_matmul_precision('highest')
def bench(name, f, n):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    walls, events = [], []
    for _ in range(n):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        s.record()
        f()
        e.record()
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t0) * 1e3)
        events.append(s.elapsed_time(e))
    print(name, statistics.median(walls), statistics.median(events), flush=True)
def bench_queued(name, f, n):
    for _ in range(3):
        f()
    torch.cuda.synchronize()
    walls, events = [], []
    for _ in range(5):
        s = torch.cuda.Event(enable_timing=True)
        e = torch.cuda.Event(enable_timing=True)
        t0 = time.perf_counter()
        s.record()
        for _ in range(n):
            f()
        e.record()
        torch.cuda.synchronize()
        walls.append((time.perf_counter() - t0) * 1e3 / n)
        events.append(s.elapsed_time(e) / n)
    print(name, statistics.median(walls), statistics.median(events), flush=True)
)";

inline constexpr const char* TORCH_VERSION_LINE =
    "print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(), flush=True)\n";

// torch's timings by case name, and its version line in `version`; empty when python3 or torch is missing.
inline std::map<std::string, Timing> run_torch(const std::string& cases, std::string& version) {
    const std::filesystem::path script =
        std::filesystem::temp_directory_path() / ("canopy-bench-torch-" + std::to_string(::getpid()) + ".py");
    std::ofstream(script) << TORCH_PRELUDE << cases << TORCH_VERSION_LINE;
    const char* python = std::getenv("CANOPY_BENCH_PYTHON");
    const std::string command = std::string(python != nullptr ? python : "python3") + " " + script.string() + " 2>&1";
    std::map<std::string, Timing> out;
    if (FILE* pipe = ::popen(command.c_str(), "r")) {
        char line[512];
        while (std::fgets(line, sizeof line, pipe) != nullptr) {
            std::istringstream in(line);
            std::string name;
            Timing t;
            in >> name;
            if (name == "torch") {
                version = line;
                version.erase(version.find_last_not_of('\n') + 1);
            } else if (in >> t.wall_ms >> t.inner_ms) {
                out[name] = t;
            } else {
                std::printf("torch: %s", line);
            }
        }
        ::pclose(pipe);
    }
    std::filesystem::remove(script);
    return out;
}

} // namespace canopy::bench
