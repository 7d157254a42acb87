#pragma once
// ReadyQueue: READY tasks, handed out smallest submission number first.
//
// A task that is ready when it is added has a larger submission number than every task added before it,
// so those go to a FIFO (O(1)); a task made ready by a completion may be older than tasks already queued,
// so those go to a min-heap (O(log n)). pop() takes the smaller of the two fronts. Entries are not removed
// when their task fails; the owner skips the ones whose task is no longer READY.
//
// Every push is noexcept and needs room made by the matching reserve call first, so the owner can reserve
// before it changes anything else.
// Thread safety: none; the owner serializes all calls.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace canopy::scheduler::detail {

class ReadyQueue {
public:
    struct Entry {
        std::uint64_t seq;
        std::uint32_t slot;
    };

    // Room for `n` more push_added / push_woken calls.
    void reserve_added(std::size_t n);
    void reserve_woken(std::size_t n);
    // REQUIRES entry.seq larger than every earlier push_added, and room.
    void push_added(Entry entry) noexcept;
    // REQUIRES room.
    void push_woken(Entry entry) noexcept;
    // The entry with the smallest seq, removed; nullopt when empty.
    std::optional<Entry> pop() noexcept;
    // The entry pop() would return, left in place.
    std::optional<Entry> top() const noexcept;
    // Frees all storage.
    void clear() noexcept;

private:
    std::vector<Entry> fifo_; // [head_, end) are queued
    std::size_t head_ = 0;
    std::vector<Entry> heap_;
};

} // namespace canopy::scheduler::detail
