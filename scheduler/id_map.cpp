#include "scheduler/detail/id_map.h"

#include <algorithm>
#include <utility>

namespace canopy::scheduler::detail {

// The low bits of the id, folded with its high bits: the daemon numbers tasks consecutively, so the tasks
// in flight fill neighbouring cells (one cache line holds four) and a probe rarely passes a second cell.
std::size_t IdMap::home(std::uint64_t id) const noexcept {
    return static_cast<std::size_t>(id ^ (id >> 32)) & (cells_.size() - 1);
}

std::size_t IdMap::distance(std::size_t cell, std::uint64_t id) const noexcept {
    return (cell - home(id)) & (cells_.size() - 1);
}

std::size_t IdMap::locate(std::uint64_t id) const noexcept {
    if (size_ == 0) {
        return NOWHERE;
    }
    const std::size_t mask = cells_.size() - 1;
    for (std::size_t i = home(id), d = 0;; i = (i + 1) & mask, ++d) {
        const Cell& cell = cells_[i];
        // Robin Hood order: past a cell nearer its home than `id` would be, `id` cannot lie.
        if (cell.slot == EMPTY || distance(i, cell.id) < d) {
            return NOWHERE;
        }
        if (cell.id == id) {
            return i;
        }
    }
}

bool IdMap::insert(std::uint64_t id, std::uint32_t slot) {
    if (locate(id) != NOWHERE) {
        return false;
    }
    if (2 * (size_ + 1) > cells_.size()) {
        grow();
    }
    place(Cell{id, slot});
    ++size_;
    return true;
}

// Robin Hood insertion: the carried cell takes the place of any cell nearer its home than the carried one
// is, and that cell is carried on.
void IdMap::place(Cell carried) noexcept {
    const std::size_t mask = cells_.size() - 1;
    for (std::size_t i = home(carried.id), d = 0;; i = (i + 1) & mask, ++d) {
        Cell& cell = cells_[i];
        if (cell.slot == EMPTY) {
            cell = carried;
            return;
        }
        const std::size_t theirs = distance(i, cell.id);
        if (theirs < d) {
            std::swap(cell, carried);
            d = theirs;
        }
    }
}

bool IdMap::erase(std::uint64_t id) noexcept {
    std::size_t hole = locate(id);
    if (hole == NOWHERE) {
        return false;
    }
    // Backward shift: the cells after the hole that are away from their home move back by one, up to an
    // empty cell or one at its home.
    const std::size_t mask = cells_.size() - 1;
    for (std::size_t next = (hole + 1) & mask; cells_[next].slot != EMPTY && distance(next, cells_[next].id) > 0;
         next = (next + 1) & mask) {
        cells_[hole] = cells_[next];
        hole = next;
    }
    cells_[hole].slot = EMPTY;
    --size_;
    return true;
}

std::optional<std::uint32_t> IdMap::find(std::uint64_t id) const noexcept {
    const std::size_t at = locate(id);
    return at == NOWHERE ? std::nullopt : std::optional<std::uint32_t>(cells_[at].slot);
}

void IdMap::clear() noexcept {
    cells_ = std::vector<Cell>();
    size_ = 0;
}

void IdMap::grow() {
    std::vector<Cell> old(std::max<std::size_t>(16, 2 * cells_.size()), Cell{0, EMPTY});
    old.swap(cells_);
    for (const Cell& cell : old) {
        if (cell.slot != EMPTY) {
            place(cell);
        }
    }
}

} // namespace canopy::scheduler::detail
