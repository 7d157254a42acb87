#pragma once
// IdMap: TaskId -> slot, an open-addressing hash table with Robin Hood linear probing and backward-shift
// deletion, so that adding and finishing a task allocate nothing once the table has grown (a node-based map
// allocates once per insert).
//
// The table has a power-of-two capacity and stays at most half full; it doubles when an insert would
// pass that. Any TaskId is a valid key; ids that are close to consecutive, as the daemon hands them out,
// probe fastest.
//
// Ownership: plain values. Thread safety: none; the owner serializes all calls.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace canopy::scheduler::detail {

class IdMap {
public:
    // Inserts id -> slot; returns false (and changes nothing) when `id` is present.
    bool insert(std::uint64_t id, std::uint32_t slot);
    // Removes `id`; returns false when it is absent.
    bool erase(std::uint64_t id) noexcept;
    std::optional<std::uint32_t> find(std::uint64_t id) const noexcept;

    std::size_t size() const noexcept { return size_; }
    // Frees the table.
    void clear() noexcept;

private:
    static constexpr std::uint32_t EMPTY = UINT32_MAX;
    static constexpr std::size_t NOWHERE = SIZE_MAX;
    struct Cell {
        std::uint64_t id;
        std::uint32_t slot; // EMPTY in an unused cell
    };

    std::size_t home(std::uint64_t id) const noexcept;
    std::size_t distance(std::size_t cell, std::uint64_t id) const noexcept; // cells past home
    std::size_t locate(std::uint64_t id) const noexcept;                     // the cell holding id, or NOWHERE
    void place(Cell cell) noexcept;
    void grow();

    std::vector<Cell> cells_;
    std::size_t size_ = 0;
};

} // namespace canopy::scheduler::detail
