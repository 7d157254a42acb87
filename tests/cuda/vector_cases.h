#pragma once
// Element-wise cases aimed at the cuda chip's vector kernels (16-byte loads and stores over a contiguous written
// view, worker/cuda/elementwise_vector.cuh) and at the border between them and the strided kernels, for
// compare_case (kernel_cases.h). Buffers start on a page, so a view's start modulo 16 is its element offset times
// the element size.
//
// A copy between two views that protocol's tensor_is_contiguous accepts runs on the copy engine on a cuda chip,
// never on a kernel; the copies here write views that are contiguous in memory but not in that sense (a dimension
// of size 1 with a stride other than 1), so they reach the copy kernel.

#include "kernel_cases.h"

#include <algorithm>

namespace canopy::testing {

// Element offsets that put a view's start at 0, one element past, half way and one element before a 16-byte
// boundary.
inline std::vector<std::uint64_t> vector_offsets(DataType dtype) {
    const std::uint64_t per = 16 / element_size(dtype);
    std::vector<std::uint64_t> offsets{0};
    for (std::uint64_t k : {std::uint64_t{1}, per / 2, per - 1}) {
        if (k != 0 && std::find(offsets.begin(), offsets.end(), k) == offsets.end()) {
            offsets.push_back(k);
        }
    }
    return offsets;
}

// `count` elements from element `offset`, contiguous in memory, shaped [count, 1] with the size-1 dimension's
// stride 3: not contiguous for tensor_is_contiguous, one contiguous dimension for the kernels.
inline ViewSpec dense_not_contiguous(std::uint32_t count, std::uint64_t offset) {
    return ViewSpec{{count, 1}, {1, 3}, offset};
}

// For one dtype: fill, iota and scale over `counts` elements at each of vector_offsets; copy and axpy with inputs
// whose 16-byte vectors coincide with the output's and ones whose start lies elsewhere modulo 16; and views that
// keep the strided kernels: a strided written view, and a strided input read by a vector kernel.
inline std::vector<KernelCase> vector_cases(DataType dtype, const std::vector<std::uint32_t>& counts) {
    using S = ScalarArg;
    const auto in = TensorTag::INPUT;
    const auto out = TensorTag::OUTPUT;
    const auto inout = TensorTag::INOUT;
    const std::uint64_t per = 16 / element_size(dtype);
    std::vector<KernelCase> cases;
    for (std::uint32_t count : counts) {
        for (std::uint64_t k : vector_offsets(dtype)) {
            const std::string where = std::to_string(count) + " from element " + std::to_string(k);
            const ViewSpec view{{count}, {}, k};
            cases.push_back({"fill", dtype, {{view, out}}, {S::f64(-1234.5678)}, Values::GENERAL, where});
            cases.push_back({"iota", dtype, {{view, out}}, {}, Values::GENERAL, where});
            cases.push_back({"scale", dtype, {{view, inout}}, {S::f64(-2.5)}, Values::GENERAL, where});
            for (std::uint64_t from : {k + per, (k + 1) % per}) {
                const std::string pair = where + ", input from element " + std::to_string(from);
                const ViewSpec input{{count}, {}, from};
                cases.push_back(
                    {"copy", dtype, {{input, in}, {dense_not_contiguous(count, k), out}}, {}, Values::GENERAL, pair});
                // One element of GENERAL values is often a NaN, an infinity or far larger than a·x: axpy would
                // leave it as it was.
                const Values values = count == 1 ? Values::SMALL : Values::GENERAL;
                cases.push_back({"axpy", dtype, {{input, in}, {view, inout}}, {S::f64(3.25)}, values, pair});
            }
        }
    }
    const ViewSpec strided{{4099}, {2}, 1};
    const ViewSpec dense{{4099}, {}, 1};
    cases.push_back({"fill", dtype, {{strided, out}}, {S::i64(-7)}, Values::GENERAL, "strided"});
    cases.push_back({"scale", dtype, {{strided, inout}}, {S::f64(3.0)}, Values::GENERAL, "strided"});
    cases.push_back({"copy", dtype, {{dense, in}, {strided, out}}, {}, Values::GENERAL, "dense to strided"});
    cases.push_back({"copy", dtype, {{strided, in}, {dense, out}}, {}, Values::GENERAL, "strided to dense"});
    cases.push_back({"axpy", dtype, {{strided, in}, {dense, inout}}, {S::f32(2.75f)}, Values::GENERAL, "strided x"});
    cases.push_back({"axpy", dtype, {{dense, in}, {strided, inout}}, {S::f32(2.75f)}, Values::GENERAL, "strided y"});
    return cases;
}

// Every element-wise kernel over `count` elements from one element past a 16-byte boundary (scale and axpy on
// finite values, so that their results are not all infinities or NaNs), with axpy's input both paired and not.
// The factors are positive: a negative one saturates to 0 for uint8, which leaves axpy's y as it was.
inline std::vector<KernelCase> long_vector_cases(DataType dtype, std::uint32_t count) {
    using S = ScalarArg;
    const auto in = TensorTag::INPUT;
    const std::uint64_t per = 16 / element_size(dtype);
    const ViewSpec view{{count}, {}, 1};
    const std::string what = std::to_string(count) + " from element 1";
    return {
        {"fill", dtype, {{view, TensorTag::OUTPUT}}, {S::f64(0.5)}, Values::GENERAL, what},
        {"iota", dtype, {{view, TensorTag::OUTPUT}}, {}, Values::GENERAL, what},
        {"scale", dtype, {{view, TensorTag::INOUT}}, {S::f64(1.0 / 3.0)}, Values::FINITE, what},
        {"copy",
         dtype,
         {{ViewSpec{{count}, {}, 1 + per}, in}, {dense_not_contiguous(count, 1), TensorTag::OUTPUT}},
         {},
         Values::GENERAL,
         what},
        {"axpy",
         dtype,
         {{ViewSpec{{count}, {}, 1 + per}, in}, {view, TensorTag::INOUT}},
         {S::f32(2.75f)},
         Values::FINITE,
         what + ", vectors paired"},
        {"axpy",
         dtype,
         {{ViewSpec{{count}, {}, 0}, in}, {view, TensorTag::INOUT}},
         {S::f32(2.75f)},
         Values::FINITE,
         what + ", input from element 0"},
    };
}

} // namespace canopy::testing
