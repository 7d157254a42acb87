// sleep_ms and the fault kernels abort and segfault.
#include "worker/kernels/detail/kernels.h"
#include "worker/kernels/detail/signature.h"

#include <chrono>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

namespace canopy::kernels::detail {
namespace {

constexpr std::int64_t MAX_SLEEP_MS = 3'600'000;

} // namespace

void check_sleep_ms(const KernelCall& call) {
    const std::int64_t ms = call.scalars[0].as_i64();
    if (ms < 0 || ms > MAX_SLEEP_MS) {
        fail(ErrorCode::BAD_REQUEST, call,
             "scalars[0] (ms) is " + std::to_string(ms) + ", must be in 0.." + std::to_string(MAX_SLEEP_MS));
    }
}

// Sleeping is this kernel's whole job; it runs on the worker's compute thread, not on a dispatch path.
void run_sleep_ms(const KernelCall& call) {
    std::this_thread::sleep_for(std::chrono::milliseconds(call.scalars[0].as_i64()));
}

void run_abort(const KernelCall&) {
    std::abort();
}

// The address comes from a volatile read, so the compiler cannot see the null pointer and must emit the store,
// which raises SIGSEGV.
void run_segfault(const KernelCall& call) {
    volatile std::uintptr_t address = 0;
    auto* target = reinterpret_cast<volatile int*>(static_cast<std::uintptr_t>(address));
    *target = 1;
    fail(ErrorCode::KERNEL_FAILED, call, "the write through a null pointer did not fault");
}

} // namespace canopy::kernels::detail
