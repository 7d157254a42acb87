#pragma once
// The GPU of the in-process CUDA tests (test_cuda): the process-wide driver and device 0's primary context,
// made current on every use. REQUIRE_GPU(g) declares `g` or, where there is no driver or device, ends the test
// through CANOPY_SKIP (tests/skip.h), which ctest reports as skipped. A process that uses this must never fork a
// process that uses CUDA.
//
// Thread safety: the tests run on one thread.

#include "cuda/context.h"
#include "cuda/driver.h"
#include "tests/skip.h"

#include <catch2/catch.hpp>
#include <optional>

namespace canopy::testing {

// The process-wide driver and device 0's context, or nullptr where there is none.
struct Gpu {
    const cuda::Driver* driver = nullptr;
    std::optional<cuda::PrimaryContext> context;
};

inline Gpu* gpu() {
    static Gpu g = [] {
        Gpu out;
        try {
            out.driver = &cuda::Driver::get();
            if (cuda::device_count(*out.driver) > 0) {
                out.context.emplace(*out.driver, 0);
            }
        } catch (const cuda::CudaError&) {
            out.driver = nullptr;
        }
        return out;
    }();
    if (g.driver == nullptr || !g.context) {
        return nullptr;
    }
    g.context->make_current();
    return &g;
}

#define REQUIRE_GPU(g)                                                                                                 \
    ::canopy::testing::Gpu* g = ::canopy::testing::gpu();                                                              \
    if (g == nullptr) {                                                                                                \
        CANOPY_SKIP("no CUDA driver or device here");                                                                  \
    }

} // namespace canopy::testing
