// sleep_ms and the fault kernels abort and segfault.
#include "worker/kernels/detail/kernels.h"
#include "worker/kernels/detail/signature.h"

#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <sys/mman.h>
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

// Stores to a page mapped without access, with SIGSEGV's default action restored first: the worker dies
// of a real SIGSEGV even when a sanitizer runtime has installed its own handler (or would report a null
// store before it faults).
void run_segfault(const KernelCall& call) {
    void* page = ::mmap(nullptr, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (page == MAP_FAILED) {
        fail(ErrorCode::KERNEL_FAILED, call, "cannot map a page to fault on");
    }
    std::signal(SIGSEGV, SIG_DFL);
    *static_cast<volatile int*>(page) = 1;
    fail(ErrorCode::KERNEL_FAILED, call, "the store to an inaccessible page did not fault");
}

} // namespace canopy::kernels::detail
