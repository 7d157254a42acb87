#pragma once
// CellPool<T>: singly linked lists of trivially copyable values, all kept in one growing array of cells
// with an intrusive free list. A task's accesses, dependents and pruned accesses are such lists, so adding
// and finishing tasks costs no allocation once the array has grown, where a vector per task costs one
// allocation each.
//
// A List names its first and last cell and counts its cells; append() and release() are O(1) and lists
// iterate in append order. Cells are
// named by index: growth moves the array, so a T& from operator[] is valid only until the next append().
// reserve(n) makes the next n appends allocate nothing; release() gives a whole list back without
// allocating.
//
// Ownership: the pool owns every cell; a List is a plain pair of indices into it.
// Thread safety: none; the owner serializes all calls.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <type_traits>
#include <vector>

namespace canopy::scheduler::detail {

inline constexpr std::uint32_t NIL = UINT32_MAX;

struct List {
    std::uint32_t head = NIL;
    std::uint32_t tail = NIL;
    std::uint32_t size = 0;
    bool empty() const noexcept { return head == NIL; }
};

template <class T>
class CellPool {
    static_assert(std::is_trivially_copyable_v<T>);
    struct Cell {
        T value;
        std::uint32_t next;
    };

public:
    // Appends `value` to `list`; returns its cell. Allocates only when every cell is in use and reserve()
    // made no room.
    std::uint32_t append(List& list, const T& value) {
        const std::uint32_t cell = take();
        cells_[cell] = Cell{value, NIL};
        if (list.tail == NIL) {
            list.head = cell;
        } else {
            cells_[list.tail].next = cell;
        }
        list.tail = cell;
        ++list.size;
        return cell;
    }

    // Gives every cell of `list` back and empties it.
    void release(List& list) noexcept {
        if (list.head != NIL) {
            free_count_ += list.size;
            cells_[list.tail].next = free_;
            free_ = list.head;
        }
        list = List{};
    }

    // Room for `n` more cells without allocation.
    void reserve(std::size_t n) {
        if (free_count_ + (cells_.capacity() - cells_.size()) < n) {
            cells_.reserve(std::max(cells_.size() + n - free_count_, 2 * cells_.capacity()));
        }
    }

    // Frees the array. REQUIRES every list to have been released or abandoned.
    void clear() noexcept {
        cells_ = std::vector<Cell>();
        free_ = NIL;
        free_count_ = 0;
    }

    T& operator[](std::uint32_t cell) noexcept { return cells_[cell].value; }
    const T& operator[](std::uint32_t cell) const noexcept { return cells_[cell].value; }
    std::uint32_t next(std::uint32_t cell) const noexcept { return cells_[cell].next; }

    // Calls f(T&) for every value of `list`, in append order. f must not append to this pool.
    template <class F>
    void for_each(const List& list, F&& f) {
        for (std::uint32_t c = list.head; c != NIL; c = cells_[c].next) {
            f(cells_[c].value);
        }
    }

private:
    std::uint32_t take() {
        if (free_ != NIL) {
            const std::uint32_t cell = free_;
            free_ = cells_[cell].next;
            --free_count_;
            return cell;
        }
        cells_.push_back(Cell{});
        return static_cast<std::uint32_t>(cells_.size() - 1);
    }

    std::vector<Cell> cells_;
    std::uint32_t free_ = NIL; // first free cell, linked through `next`
    std::size_t free_count_ = 0;
};

} // namespace canopy::scheduler::detail
