#pragma once
// Futex waits and wakes on 32-bit words in shared memory (no FUTEX_PRIVATE_FLAG: the waiter and the
// waker are different processes).
//
// Thread safety: any thread, any process mapping the word.

#include <algorithm>
#include <atomic>
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

// x86 PAUSE (or a compiler barrier elsewhere) for spin loops.
inline void cpu_relax() noexcept {
#if defined(__x86_64__) || defined(__i386__)
    __builtin_ia32_pause();
#else
    std::atomic_signal_fence(std::memory_order_seq_cst);
#endif
}

// How long a waiter spins before it blocks, learned from how its waits end: a wait the spin satisfied doubles
// the budget (up to the caller's limit), a wait that had to block halves it (down to MIN_SPIN). A ping-pong
// keeps its full spin; on a machine with more runnable threads than cores, where spinning only delays the
// thread that would make progress, spinners step aside. Relaxed atomics: one waiter uses it, a racing update
// only misplaces one halving or doubling.
class AdaptiveSpin {
public:
    static constexpr std::uint32_t MIN_SPIN = 32;

    std::uint32_t budget(std::uint32_t limit) const noexcept {
        return std::min(limit, budget_.load(std::memory_order_relaxed));
    }
    void satisfied(std::uint32_t limit) noexcept {
        const std::uint32_t b = budget_.load(std::memory_order_relaxed);
        budget_.store(std::min(limit, std::max(b, MIN_SPIN) * 2), std::memory_order_relaxed);
    }
    void blocked() noexcept {
        budget_.store(std::max(MIN_SPIN, budget_.load(std::memory_order_relaxed) / 2), std::memory_order_relaxed);
    }

private:
    std::atomic<std::uint32_t> budget_{UINT32_MAX};
};

} // namespace canopy::ipc
