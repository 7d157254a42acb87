#pragma once
// What bench_gpu_engine measured, and its tables (markdown, on stdout): each canopy figure next to its same-run
// baseline, the ratio, and the target with "met" or "missed".
//
// Thread safety: plain values; print_engine_report writes to stdout.

#include "torch_baseline.h"

#include <cstdio>
#include <map>
#include <string>

namespace canopy::bench {

inline constexpr double STREAM_TARGET = 1.3;     // per task / raw queued launch
inline constexpr double CHAIN_TARGET = 1.5;      // per task / raw queued launch
inline constexpr double BANDWIDTH_TARGET = 0.85; // canopy / torch, read+write bytes per second

// (a), microseconds per launch.
struct RawFigures {
    double scale_sync_median = 0; // one launch + synchronize, median
    double scale_sync_mean = 0;   // a loop of launches each followed by a synchronize, per launch
    double scale_queued = 0;      // a loop of launches and one synchronize, per launch
    double empty_sync_mean = 0;
    double empty_queued = 0;
};

// (b), microseconds per task: the graph's wall time, and its span on the chip (first start to last end).
struct GraphFigures {
    double wall_us = 0;
    double intake_us = 0; // request sent -> the first task's start on the chip, per task of the graph
    double span_us = 0;
};

// (c), milliseconds: one task (wall, and the chip's start..end), and per task of a graph of several.
struct BandwidthFigures {
    Timing one;
    double queued_ms = 0;
};

// (d), microseconds.
struct Latency {
    double median_us = 0;
    double p90_us = 0;
};

struct EngineFigures {
    int tasks = 0;        // per graph of (b), per loop of (a)
    int queued = 0;       // tasks per graph in (c)
    double big_bytes = 0; // read+write bytes of one task in (c)
    int idle_calls = 0;   // calls of (d)
    int idle_gap_ms = 0;  // between the calls of (d)
    RawFigures raw;
    GraphFigures stream;
    GraphFigures chain;
    BandwidthFigures copy;
    BandwidthFigures scale;
    Latency cli;
    Latency socket;
    Latency host_only; // a sleep_ms of 0 on the chip: the socket path with no GPU work
    Latency direct;
    Latency echo; // one byte echoed by another process blocked in epoll_wait
};

namespace detail {

inline const char* verdict(bool met) {
    return met ? "met" : "missed";
}

inline void graph_row(const char* what, const GraphFigures& g, double floor, double target) {
    const double ratio = g.wall_us / floor;
    std::printf("| %s | %.2f us | %.2f us | %.2f us | %.2f us | %.2fx | <= %.1fx: %s |\n", what, g.wall_us, g.intake_us,
                g.span_us, floor, ratio, target, verdict(ratio <= target));
}

// GB/s of `bytes` moved in `ms`.
inline double rate(double bytes, double ms) {
    return bytes / (ms * 1e6);
}

inline void bandwidth_rows(const char* what, const BandwidthFigures& c, const EngineFigures& f,
                           const std::map<std::string, Timing>& torch, const std::string& name) {
    const double bytes = f.big_bytes;
    const auto one = torch.find(name);
    const auto queued = torch.find(name + "_queued");
    if (one == torch.end() || queued == torch.end()) {
        std::printf("| %s, one task | %.3f ms (chip %.3f ms) | %.0f GB/s | - | - | - |\n", what, c.one.wall_ms,
                    c.one.inner_ms, rate(bytes, c.one.wall_ms));
        std::printf("| %s, %d in one graph | %.3f ms | %.0f GB/s | - | - | - |\n", what, f.queued, c.queued_ms,
                    rate(bytes, c.queued_ms));
        return;
    }
    const double strict = one->second.inner_ms / c.one.wall_ms;
    std::printf("| %s, one task vs one call | %.3f ms (chip %.3f ms) | %.0f GB/s (chip %.0f) | %.3f ms (events %.3f "
                "ms) | %.0f GB/s (events %.0f) | %.1f %% of events, %.1f %% of wall, chip %.1f %% of events: %s |\n",
                what, c.one.wall_ms, c.one.inner_ms, rate(bytes, c.one.wall_ms), rate(bytes, c.one.inner_ms),
                one->second.wall_ms, one->second.inner_ms, rate(bytes, one->second.wall_ms),
                rate(bytes, one->second.inner_ms), strict * 100, one->second.wall_ms / c.one.wall_ms * 100,
                one->second.inner_ms / c.one.inner_ms * 100, verdict(strict >= BANDWIDTH_TARGET));
    const double amortized = queued->second.wall_ms / c.queued_ms;
    std::printf("| %s, %d in one graph vs %d queued calls | %.3f ms | %.0f GB/s | %.3f ms | %.0f GB/s | %.1f %%: %s "
                "|\n",
                what, f.queued, f.queued, c.queued_ms, rate(bytes, c.queued_ms), queued->second.wall_ms,
                rate(bytes, queued->second.wall_ms), amortized * 100, verdict(amortized >= BANDWIDTH_TARGET));
}

inline void latency_row(const char* what, const Latency& l, const Latency& direct, const Latency& echo) {
    std::printf("| %s | %.1f us | %.1f us | %.2fx | %.2fx |\n", what, l.median_us, l.p90_us,
                l.median_us / direct.median_us, l.median_us / echo.median_us);
}

} // namespace detail

inline void print_engine_report(const EngineFigures& f, const std::map<std::string, Timing>& torch) {
    const RawFigures& r = f.raw;
    std::printf("\n(a) raw launches from this process, %d per loop\n\n| loop | per launch |\n|---|---:|\n", f.tasks);
    std::printf("| scale (1024 float32), synchronize after each: median / loop mean | %.2f us / %.2f us |\n",
                r.scale_sync_median, r.scale_sync_mean);
    std::printf("| scale (1024 float32), queued on one stream, one synchronize | %.2f us |\n", r.scale_queued);
    std::printf("| empty kernel, synchronize after each (loop mean) | %.2f us |\n", r.empty_sync_mean);
    std::printf("| empty kernel, queued on one stream, one synchronize | %.2f us |\n", r.empty_queued);

    std::printf(
        "\n(b) one `run` with wait of %d scale tasks (1024 float32 each) on one cuda chip, through the "
        "socket\n\n| graph | wall per task | intake per task (sent -> first start) | chip span per task | raw queued "
        "launch | ratio | target |\n|---|---:|---:|---:|---:|---:|---|\n",
        f.tasks);
    detail::graph_row("stream: independent tasks, each over its own view", f.stream, r.scale_queued, STREAM_TARGET);
    detail::graph_row("chain: dependent tasks over one view", f.chain, r.scale_queued, CHAIN_TARGET);

    std::printf("\n(c) 256 MiB float32 on the cuda chip (CUDA_VMM buffers) vs torch, read+write bytes (target >= "
                "%.0f %%)\n\n| work | canopy | canopy rate | torch | torch rate | canopy / torch |\n"
                "|---|---:|---:|---:|---:|---|\n",
                BANDWIDTH_TARGET * 100);
    detail::bandwidth_rows("copy (copy engine)", f.copy, f, torch, "copy");
    detail::bandwidth_rows("scale (vector kernel)", f.scale, f, torch, "scale");

    std::printf("\n(d) one scale task (1024 float32) on an idle GPU, %d calls %d ms apart\n\n| path | median | p90 | "
                "ratio to direct | ratio to echo |\n|---|---:|---:|---:|---:|\n",
                f.idle_calls, f.idle_gap_ms);
    detail::latency_row("`canopy submit scale ... --wait` (cli::run_cli: connect, request, reply, render)", f.cli,
                        f.direct, f.echo);
    detail::latency_row("submit with wait over a connected socket", f.socket, f.direct, f.echo);
    detail::latency_row("sleep_ms 0 on the same chip, submit with wait (no GPU work)", f.host_only, f.direct, f.echo);
    detail::latency_row("direct launch + synchronize in this process", f.direct, f.direct, f.echo);
    detail::latency_row("one byte echoed by another process blocked in epoll_wait", f.echo, f.direct, f.echo);
    std::fflush(stdout);
}

} // namespace canopy::bench
