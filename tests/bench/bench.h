#pragma once
// A header-only micro-benchmark harness for canopy's benchmarks; no dependency beyond the standard
// library.
//
// measure(op) calls `op` in batches sized so one batch takes about 2 ms (between 1 and 5 ms), times each
// batch with std::chrono::steady_clock and divides by the batch size, and keeps SAMPLES (>= 31) such
// per-op times after one warm-up batch. It reports their median, p10 and p90 in nanoseconds
// (nearest-rank percentiles). print_row writes one markdown table row that states an operation's result
// next to a baseline measured in the same run.
//
// do_not_optimize(x) is a compiler barrier: the compiler must assume `x` is read and, for a non-const
// lvalue, modified, so neither the computation producing it nor the one consuming it is optimized away
// or hoisted out of the batch loop. It emits no instruction.
//
// Thread safety: measure and print_* run on the calling thread only; nothing is shared.

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

namespace canopy::bench {

template <class T>
inline void do_not_optimize(const T& value) {
    __asm__ __volatile__("" : : "m"(value) : "memory");
}

template <class T>
inline void do_not_optimize(T& value) {
    __asm__ __volatile__("" : "+m"(value) : : "memory");
}

// Per-op time of one operation, in nanoseconds.
struct Result {
    double median_ns;
    double p10_ns;
    double p90_ns;
    std::uint64_t batch; // calls per sample
    std::size_t samples; // samples taken
};

struct Options {
    std::size_t samples = 51;
    std::chrono::nanoseconds batch_time = std::chrono::milliseconds(2);
};

namespace detail {

using Clock = std::chrono::steady_clock;

template <class F>
Clock::duration run_batch(F& op, std::uint64_t n) {
    const auto start = Clock::now();
    for (std::uint64_t i = 0; i < n; ++i) {
        op();
    }
    return Clock::now() - start;
}

// Doubles the batch until it takes at least 1 ms, then scales it to the target batch time.
template <class F>
std::uint64_t calibrate(F& op, std::chrono::nanoseconds target) {
    std::uint64_t batch = 1;
    for (;;) {
        const auto took = std::chrono::duration_cast<std::chrono::nanoseconds>(run_batch(op, batch));
        if (took >= std::chrono::milliseconds(1) || batch >= (std::uint64_t{1} << 40)) {
            const double scale =
                static_cast<double>(target.count()) / static_cast<double>(std::max<std::int64_t>(took.count(), 1));
            return std::max<std::uint64_t>(1, static_cast<std::uint64_t>(static_cast<double>(batch) * scale));
        }
        batch *= 2;
    }
}

// Nearest-rank percentile of sorted values, p in (0, 100].
inline double percentile(const std::vector<double>& sorted, int p) {
    const std::size_t n = sorted.size();
    const std::size_t rank = (n * static_cast<std::size_t>(p) + 99) / 100; // ceil(p/100 * n), 1-based
    return sorted[std::clamp<std::size_t>(rank, 1, n) - 1];
}

} // namespace detail

template <class F>
Result measure(F&& op, Options options = {}) {
    options.samples = std::max<std::size_t>(options.samples, 31);
    const std::uint64_t batch = detail::calibrate(op, options.batch_time);
    detail::run_batch(op, batch); // warm-up
    std::vector<double> per_op(options.samples);
    for (double& sample : per_op) {
        const auto took = std::chrono::duration_cast<std::chrono::nanoseconds>(detail::run_batch(op, batch));
        sample = static_cast<double>(took.count()) / static_cast<double>(batch);
    }
    std::sort(per_op.begin(), per_op.end());
    return {detail::percentile(per_op, 50), detail::percentile(per_op, 10), detail::percentile(per_op, 90), batch,
            per_op.size()};
}

inline void print_header() {
    std::printf("| operation | median ns | p10-p90 ns | baseline | baseline median ns | ratio |\n");
    std::printf("|---|---:|---:|---|---:|---:|\n");
}

inline void print_row(const std::string& name, const Result& r, const std::string& baseline_name,
                      const Result& baseline) {
    std::printf("| %s | %.1f | %.1f-%.1f | %s | %.1f | %.1fx |\n", name.c_str(), r.median_ns, r.p10_ns, r.p90_ns,
                baseline_name.c_str(), baseline.median_ns, r.median_ns / baseline.median_ns);
    std::fflush(stdout);
}

} // namespace canopy::bench
