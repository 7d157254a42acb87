#include "ipc/futex.h"

#include <ctime>
#include <linux/futex.h>
#include <sched.h>
#include <sys/syscall.h>
#include <unistd.h>

namespace canopy::ipc {

static_assert(sizeof(std::atomic<std::uint32_t>) == sizeof(std::uint32_t));

void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected) noexcept {
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, expected, nullptr, nullptr, 0);
}

void futex_wait_for(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::uint64_t timeout_ns) noexcept {
    timespec ts{};
    ts.tv_sec = static_cast<time_t>(timeout_ns / 1000000000ULL);
    ts.tv_nsec = static_cast<long>(timeout_ns % 1000000000ULL);
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void futex_wake_all(std::atomic<std::uint32_t>* word) noexcept {
    ::syscall(SYS_futex, reinterpret_cast<std::uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

void EventCount::bump() noexcept {
    word_.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(&word_);
}

void EventCount::wait_until(std::uint32_t seen, std::chrono::steady_clock::time_point deadline) noexcept {
    if (deadline == std::chrono::steady_clock::time_point::max()) {
        futex_wait(&word_, seen);
        return;
    }
    const auto left = deadline - std::chrono::steady_clock::now();
    if (left > std::chrono::nanoseconds::zero()) {
        futex_wait_for(&word_, seen,
                       static_cast<std::uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(left).count()));
    }
}

void spin_pause(std::uint32_t step, std::uint32_t yield_every) noexcept {
    if (step % yield_every == yield_every - 1) {
        ::sched_yield();
    } else {
        cpu_relax();
    }
}

} // namespace canopy::ipc
