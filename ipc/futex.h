#pragma once
// Futex waits and wakes on 32-bit words in shared memory (no FUTEX_PRIVATE_FLAG: the waiter and the
// waker are different processes).
//
// Thread safety: any thread, any process mapping the word.

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>

namespace canopy::ipc {

// Blocks while *word == expected, until woken or a signal arrives. Returns without error on a
// spurious wake, EAGAIN (the value changed) or EINTR; callers re-check their condition.
void futex_wait(std::atomic<std::uint32_t>* word, std::uint32_t expected) noexcept;
// The same with a relative timeout in nanoseconds.
void futex_wait_for(std::atomic<std::uint32_t>* word, std::uint32_t expected, std::uint64_t timeout_ns) noexcept;
// Wakes every waiter on the word.
void futex_wake_all(std::atomic<std::uint32_t>* word) noexcept;

// The low 32 bits of a 64-bit sequence counter, as a futex word (little-endian).
inline std::atomic<std::uint32_t>* low_word(std::atomic<std::uint64_t>* seq) noexcept {
    return reinterpret_cast<std::atomic<std::uint32_t>*>(seq);
}

// A counter threads block on until it moves. bump() takes no lock, so it may be called under any mutex, and no
// wake-up is lost: a waiter reads value() before it checks its condition and then waits for the counter to
// differ from what it read, which the kernel compares atomically with going to sleep.
//   for (;;) { const auto seen = events.value(); if (condition()) break; events.wait_until(seen, deadline); }
class EventCount {
public:
    std::uint32_t value() const noexcept { return word_.load(std::memory_order_seq_cst); }
    void bump() noexcept;
    // Returns once value() != seen, at `deadline` (time_point::max(): none), or spuriously; callers re-check.
    void wait_until(std::uint32_t seen, std::chrono::steady_clock::time_point deadline) noexcept;

private:
    std::atomic<std::uint32_t> word_{0};
};

// x86 PAUSE (or a compiler barrier elsewhere) for spin loops.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

// One step of a spin-wait: PAUSE, and every SPIN_YIELD_EVERY steps a sched_yield(). The yield costs one system
// call when the CPU has nothing else to run; otherwise a thread that was woken onto this CPU runs now instead of
// waiting for the spinner's time slice to end, which on a host with few cores is the difference between a
// hand-off of microseconds and one of milliseconds.
inline constexpr std::uint32_t SPIN_YIELD_EVERY = 128;
void spin_pause(std::uint32_t step, std::uint32_t yield_every = SPIN_YIELD_EVERY) noexcept;

// How long a waiter spins before it blocks, learned from how its waits end. A wait the spin satisfied, or one
// that blocked for at most WORTH_SPINNING, doubles the budget, up to the caller's limit; a longer block halves
// it, down to MIN_SPIN. A ping-pong and short device tasks keep their full spin; a thread whose work
// comes rarely stops spinning, which on a machine with more runnable threads than cores leaves the CPU to the
// threads that make progress. Relaxed atomics: one waiter uses it, a racing update only misplaces one step.
class AdaptiveSpin {
public:
    static constexpr std::uint32_t MIN_SPIN = 32;
    static constexpr std::chrono::nanoseconds WORTH_SPINNING{40000};

    std::uint32_t budget(std::uint32_t limit) const noexcept {
        return std::min(limit, budget_.load(std::memory_order_relaxed));
    }
    // A wait the spin satisfied (no clock read on this path).
    void satisfied(std::uint32_t limit) noexcept {
        const std::uint32_t b = budget_.load(std::memory_order_relaxed);
        if (b < limit) {
            budget_.store(std::min(limit, std::max(b, MIN_SPIN) * 2), std::memory_order_relaxed);
        }
    }
    // A wait that blocked for `blocked`.
    void blocked(std::chrono::nanoseconds blocked, std::uint32_t limit) noexcept {
        if (blocked <= WORTH_SPINNING) {
            satisfied(limit);
        } else {
            budget_.store(std::max(MIN_SPIN, budget_.load(std::memory_order_relaxed) / 2), std::memory_order_relaxed);
        }
    }

private:
    std::atomic<std::uint32_t> budget_{UINT32_MAX};
};

} // namespace canopy::ipc
