// bench_graph_intake: what the daemon's control plane adds in front of a chip when a graph of many small tasks
// arrives, measured on a sim chip so that it runs on any machine (bench_gpu_engine measures the same graphs on a
// cuda chip). One `run` with wait of 1000 `scale` tasks over 1024 float32 each, from a connected client:
//   stream   independent tasks, each over its own view of one posix_shm buffer
//   chain    dependent tasks, all over one view (ordered on the chip's lane)
// Per graph: the wall time from the request's first byte sent to the reply's last byte read; the intake, from the
// request sent to the first task's start on the chip (the checks of the whole graph, then the first dispatch);
// the chip's span, from the first task's start to the last one's end. Baseline, same run: the sim chip's span per
// task is the chip's own cost; the ratio wall / span is what the control plane costs on top of it.
// Medians of RUNS graphs after one untimed graph.
#include "bench.h"
#include "control_client.h"
#include "service_harness.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

using namespace canopy;
using nlohmann::json;

namespace {

constexpr int TASKS = 1000;
constexpr std::uint32_t SMALL = 1024;
constexpr int RUNS = 21;

using Clock = std::chrono::steady_clock; // CLOCK_MONOTONIC, the clock of the reply's start_ns and end_ns

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
}

json scale_task(const std::string& name, const std::string& id, std::uint64_t offset) {
    return {{"name", name},
            {"kernel", "scale"},
            {"on", "chip0"},
            {"args",
             {{{"tensor", {{"buffer", id}, {"dtype", "float32"}, {"shape", {SMALL}}, {"byte_offset", offset}}},
               {"tag", "inout"}},
              {{"scalar", {{"float32", 0.999}}}}}}};
}

struct Figures {
    double wall_us = 0;   // per task
    double intake_us = 0; // per task: request sent -> first task's start
    double span_us = 0;   // per task: first start -> last end
};

Figures run_graph(bench::ControlClient& client, const std::vector<json>& tasks) {
    const std::string framed =
        bench::ControlClient::frame({{"op", "run"}, {"wait", true}, {"graph", {{"tasks", tasks}}}});
    std::vector<double> walls;
    std::vector<double> intakes;
    std::vector<double> spans;
    for (int run = 0; run <= RUNS; ++run) {
        const auto start = Clock::now();
        const std::string body = client.exchange(framed);
        const auto end = Clock::now();
        const bench::TaskTimes times = bench::completed_tasks(body);
        if (times.count != TASKS) {
            throw std::runtime_error("a graph completed " + std::to_string(times.count) + " of " +
                                     std::to_string(TASKS) + " tasks: " + body.substr(0, 300));
        }
        if (run == 0) {
            continue;
        }
        const auto sent_ns = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count());
        walls.push_back(std::chrono::duration<double, std::micro>(end - start).count() / TASKS);
        intakes.push_back(static_cast<double>(times.first_start_ns - sent_ns) / 1e3 / TASKS);
        spans.push_back(static_cast<double>(times.last_end_ns - times.first_start_ns) / 1e3 / TASKS);
    }
    return {median(walls), median(intakes), median(spans)};
}

void print_row(const char* name, const Figures& f) {
    std::printf("| %s | %.2f µs | %.2f µs | %.2f µs | %.2fx |\n", name, f.wall_us, f.intake_us, f.span_us,
                f.wall_us / f.span_us);
}

} // namespace

int main() {
    bench::ServiceHarness harness("canopy-bench-intake", [](config::Config& cfg) {
        cfg.node.chips = {config::ChipConfig{0, config::ChipBackend::SIM}};
        cfg.node.subs = 0;
    });
    bench::ControlClient client(harness.fd());
    const std::string buffer =
        client.call({{"op", "buffer.create"}, {"bytes", std::uint64_t{TASKS} * SMALL * sizeof(float)}})["buffer"]["id"];
    std::vector<json> stream;
    std::vector<json> chain;
    for (int i = 0; i < TASKS; ++i) {
        stream.push_back(scale_task("s" + std::to_string(i), buffer,
                                    std::uint64_t{SMALL} * sizeof(float) * static_cast<std::uint64_t>(i)));
        chain.push_back(scale_task("c" + std::to_string(i), buffer, 0));
    }
    const Figures s = run_graph(client, stream);
    const Figures c = run_graph(client, chain);
    std::printf("bench_graph_intake: one run with wait of %d scale tasks (%u float32 each) on a sim chip, medians "
                "of %d graphs\n\n",
                TASKS, SMALL, RUNS);
    std::printf("| graph | wall per task | intake per task (sent -> first start) | chip span per task | wall / "
                "span |\n|---|---:|---:|---:|---:|\n");
    print_row("stream: independent tasks", s);
    print_row("chain: dependent tasks over one view", c);
    return 0;
}
