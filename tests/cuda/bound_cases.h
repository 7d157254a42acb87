#pragma once
// Runs reduce_sum or matmul on a cuda chip and on a sim chip over the same inputs and checks the cuda chip's
// results against the sim chip's within the bound docs/kernels.md states (worker/kernels/bounds.h), and that
// nothing else of any written buffer differs at all (gaps between strided elements, slack around the view).
// Integer dtypes have bound 0: bit for bit. Where the sim result is a NaN the cuda result must be a NaN; where
// it is an infinity, the same infinity.
//
// CaseRun holds one case's buffers (inputs once, every written argument once per run, all starting from the
// same bytes) so that a test can also run a case twice on one chip and compare the runs bit for bit.

#include "kernel_cases.h"
#include "protocol/builtin_launch.h"
#include "worker/kernels/bounds.h"
#include "worker/kernels/half.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <functional>

namespace canopy::testing {

// Element offsets (in elements, from the buffer's start) of a view, in logical (row-major) order.
inline std::vector<std::uint64_t> view_offsets(const ViewSpec& v) {
    const auto strides = v.strides.empty() ? row_major(v.shape) : v.strides;
    std::vector<std::uint64_t> out{v.offset};
    for (std::size_t d = 0; d < v.shape.size(); ++d) {
        std::vector<std::uint64_t> next;
        next.reserve(out.size() * v.shape[d]);
        for (std::uint64_t base : out) {
            for (std::uint64_t i = 0; i < v.shape[d]; ++i) {
                next.push_back(base + i * strides[d]);
            }
        }
        out = std::move(next);
    }
    return out;
}

// An element of `dtype` as a double (exact for every float dtype; integers as their value).
inline double element_value(const std::byte* p, DataType dtype) {
    switch (dtype) {
    case DataType::FLOAT32: {
        float f;
        std::memcpy(&f, p, 4);
        return f;
    }
    case DataType::FLOAT64: {
        double d;
        std::memcpy(&d, p, 8);
        return d;
    }
    case DataType::FLOAT16: {
        std::uint16_t h;
        std::memcpy(&h, p, 2);
        return kernels::float16_to_float(h);
    }
    case DataType::BFLOAT16: {
        std::uint16_t h;
        std::memcpy(&h, p, 2);
        return kernels::bfloat16_to_float(h);
    }
    default:
        return 0.0;
    }
}

// Fills the initial bytes of argument `arg` (instead of fill_random).
using Filler = std::function<void(std::size_t arg, std::span<std::byte> bytes)>;

class CaseRun {
public:
    // `runs` copies of every written argument.
    CaseRun(daemon::Supervisor& sup, KernelCase c, std::size_t runs, std::mt19937_64& rng, const Filler& filler = {})
        : sup_(sup), c_(std::move(c)) {
        const std::size_t esize = element_size(c_.dtype);
        for (std::size_t i = 0; i < c_.args.size(); ++i) {
            Arg a;
            a.written = c_.args[i].tag != TensorTag::INPUT;
            const std::uint64_t nbytes = (extent_elements(c_.args[i].view) + 16) * esize;
            a.initial.resize(nbytes);
            if (filler) {
                filler(i, a.initial);
            } else {
                fill_random(a.initial, c_.dtype, c_.values, rng);
            }
            for (std::size_t k = 0; k < (a.written ? runs : 1); ++k) {
                a.buffers.push_back(shm_buffer(sup, nbytes));
                a.maps.push_back(map_shm(a.buffers.back()));
                std::memcpy(a.maps.back().data(), a.initial.data(), nbytes);
            }
            args_.push_back(std::move(a));
        }
    }

    ~CaseRun() {
        for (const Arg& a : args_) {
            for (const auto& d : a.buffers) {
                (void)sup_.release_buffer(d.identity);
            }
        }
    }
    CaseRun(const CaseRun&) = delete;
    CaseRun& operator=(const CaseRun&) = delete;

    const KernelCase& kase() const noexcept { return c_; }

    // Runs the case on `worker` into copy `run` of the written arguments, with these launch flags.
    daemon::TaskResult run(const std::string& worker, std::size_t run, std::uint32_t flags = 0) {
        std::vector<TensorArg> tensors;
        for (std::size_t i = 0; i < c_.args.size(); ++i) {
            const BufferDescriptor& d = args_[i].buffers[args_[i].written ? run : 0];
            tensors.push_back({tensor_of(d, c_.dtype, c_.args[i].view), c_.args[i].tag});
        }
        auto request = task(c_.kernel, worker, std::move(tensors), c_.scalars);
        set_builtin_launch_flags(request.launch, flags);
        return sup_.run(std::move(request));
    }

    void require_run(const std::string& worker, std::size_t run, std::uint32_t flags = 0) {
        const auto r = this->run(worker, run, flags);
        INFO(worker << ": " << error_code_name(r.code) << " " << r.message);
        REQUIRE(r.ok());
    }

    // The bytes of argument `arg` (copy `run` when it is written).
    const std::byte* bytes(std::size_t arg, std::size_t run = 0) const {
        return args_[arg].maps[args_[arg].written ? run : 0].data();
    }
    std::size_t size(std::size_t arg) const { return args_[arg].initial.size(); }
    const std::vector<std::byte>& initial(std::size_t arg) const { return args_[arg].initial; }

private:
    struct Arg {
        bool written = false;
        std::vector<BufferDescriptor> buffers;
        std::vector<ipc::MappedRegion> maps;
        std::vector<std::byte> initial;
    };
    daemon::Supervisor& sup_;
    KernelCase c_;
    std::vector<Arg> args_;
};

// The largest |difference| / bound over the cases checked, and how many checked elements differed at all.
struct BoundStats {
    int cases = 0;
    std::uint64_t elements = 0;
    std::uint64_t differing = 0;
    double worst = 0.0;
};

// Checks one output element against the reference: NaN for NaN, the same infinity, else within `bound`.
inline void check_element(double got, double expected, double bound, BoundStats& stats, const std::string& where) {
    ++stats.elements;
    if (std::isnan(expected) || std::isinf(expected)) {
        const bool same_class = std::isnan(expected) ? std::isnan(got) : got == expected;
        if (!same_class) {
            FAIL(where << ": got " << got << ", the sim chip " << expected);
        }
        return;
    }
    const double difference = std::fabs(got - expected);
    if (got != expected) {
        ++stats.differing;
    }
    if (!(difference <= bound)) {
        FAIL(where << ": got " << got << ", the sim chip " << expected << ": |difference| " << difference
                   << " exceeds the bound " << bound);
    }
    if (bound > 0) {
        stats.worst = std::max(stats.worst, difference / bound);
    }
}

// Every byte of written argument `arg` outside `checked` (element offsets) equal in runs `got` and `want`.
inline void check_rest_equal(const CaseRun& run, std::size_t arg, std::size_t got, std::size_t want,
                             const std::vector<std::uint64_t>& checked) {
    const std::size_t esize = element_size(run.kase().dtype);
    std::vector<bool> skip(run.size(arg) / esize + 1, false);
    for (std::uint64_t e : checked) {
        skip[e] = true;
    }
    for (std::size_t at = 0; at + esize <= run.size(arg); at += esize) {
        if (!skip[at / esize] && std::memcmp(run.bytes(arg, got) + at, run.bytes(arg, want) + at, esize) != 0) {
            FAIL("args[" << arg << "] differs outside the view at element " << at / esize);
        }
    }
}

// reduce_sum: run `got` against run `want` (the sim chip's).
inline void check_reduce_bound(const CaseRun& run, std::size_t got, std::size_t want, BoundStats& stats) {
    const KernelCase& c = run.kase();
    const std::size_t esize = element_size(c.dtype);
    const std::vector<std::uint64_t> xs = view_offsets(c.args[0].view);
    double sum_abs = 0.0;
    for (std::uint64_t e : xs) {
        sum_abs += std::fabs(element_value(run.bytes(0) + e * esize, c.dtype));
    }
    const std::uint64_t y = c.args[1].view.offset;
    if (is_float(c.dtype)) {
        const double a = element_value(run.bytes(1, got) + y * esize, c.dtype);
        const double b = element_value(run.bytes(1, want) + y * esize, c.dtype);
        check_element(a, b, kernels::reduce_sum_bound(c.dtype, xs.size(), sum_abs, a, b), stats, describe(c));
        check_rest_equal(run, 1, got, want, {y});
    } else {
        ++stats.elements;
        check_rest_equal(run, 1, got, want, {});
    }
    ++stats.cases;
}

// matmul: every element of C in run `got` against run `want`, with `tf32` as the task's launch flag.
inline void check_matmul_bound(const CaseRun& run, std::size_t got, std::size_t want, bool tf32, BoundStats& stats) {
    const KernelCase& c = run.kase();
    const std::size_t esize = element_size(c.dtype);
    const auto& av = c.args[0].view;
    const auto& bv = c.args[1].view;
    const std::uint64_t M = av.shape[0];
    const std::uint64_t K = av.shape[1];
    const std::uint64_t N = bv.shape[1];
    const std::vector<std::uint64_t> as = view_offsets(av);
    const std::vector<std::uint64_t> bs = view_offsets(bv);
    const std::vector<std::uint64_t> cs = view_offsets(c.args[2].view);
    std::vector<double> a(as.size());
    std::vector<double> b(bs.size());
    for (std::size_t i = 0; i < as.size(); ++i) {
        a[i] = element_value(run.bytes(0) + as[i] * esize, c.dtype);
    }
    for (std::size_t i = 0; i < bs.size(); ++i) {
        b[i] = element_value(run.bytes(1) + bs[i] * esize, c.dtype);
    }
    for (std::uint64_t m = 0; m < M; ++m) {
        for (std::uint64_t n = 0; n < N; ++n) {
            double sum_abs = 0.0;
            for (std::uint64_t k = 0; k < K; ++k) {
                sum_abs += std::fabs(a[m * K + k] * b[k * N + n]);
            }
            const std::uint64_t at = cs[m * N + n] * esize;
            const double x = element_value(run.bytes(2, got) + at, c.dtype);
            const double y = element_value(run.bytes(2, want) + at, c.dtype);
            check_element(x, y, kernels::matmul_bound(c.dtype, K, tf32, sum_abs, x, y), stats,
                          describe(c) + " C[" + std::to_string(m) + "," + std::to_string(n) + "]");
        }
    }
    check_rest_equal(run, 2, got, want, cs);
    ++stats.cases;
}

// Runs `c` on `cuda` (run 0) and `sim` (run 1) and checks it within the bound.
inline void compare_within_bound(daemon::Supervisor& sup, const std::string& cuda, const std::string& sim,
                                 const KernelCase& c, std::mt19937_64& rng, BoundStats& stats,
                                 std::uint32_t flags = 0) {
    INFO(describe(c));
    CaseRun run(sup, c, 2, rng);
    run.require_run(sim, 1, flags);
    run.require_run(cuda, 0, flags);
    if (c.kernel == "reduce_sum") {
        check_reduce_bound(run, 0, 1, stats);
    } else {
        check_matmul_bound(run, 0, 1, (flags & BUILTIN_LAUNCH_TF32) != 0, stats);
    }
}

} // namespace canopy::testing
