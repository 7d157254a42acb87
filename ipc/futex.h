#pragma once
// Futex waits and wakes on 32-bit words in shared memory (no FUTEX_PRIVATE_FLAG: the waiter and the
// waker are different processes).
//
// Thread safety: any thread, any process mapping the word.

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

} // namespace canopy::ipc
