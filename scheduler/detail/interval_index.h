#pragma once
// IntervalIndex: a multiset of tensor accesses, each keyed by a span on one axis and carrying a span on the
// other axis and its view, that finds every access whose two spans meet a query's two spans.
//
// Items are grouped by length class: an item whose key span has length in [2^c, 2^(c+1)) and meets the
// query span [lo, hi) starts in (lo - 2^(c+1), hi). Each class is one ordered run of a std::multimap keyed
// by (class, start), so a query costs one O(log n) descent per non-empty class plus one step per item that
// starts in that window. Items of the window that end before lo are stepped over, so a pile of items with
// one start costs its size even when it ends just before the query.
//
// Parking extracts an item's node from the map (queries no longer see it) and hands it to the caller;
// unparking puts the node back. Neither allocates.
//
// Ownership: items hold a copy of their view and an AccessRef; the nodes come from the BlockPool given at
// construction, which must outlive the index; a parked node is owned by its Parked value. Lifetime: a Handle
// stays valid until its item is erased or parked, whatever else changes meanwhile.
// Thread safety: none; the owner serializes all calls.

#include "protocol/tensor.h"
#include "scheduler/detail/block_pool.h"
#include "scheduler/detail/footprint.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <utility>

namespace canopy::scheduler::detail {

// An access of a task: the task's slot in the task table and the access's position among its arguments.
struct AccessRef {
    std::uint32_t slot;
    std::uint32_t access;
};

class IntervalIndex {
    struct Key {
        std::uint8_t length_class;
        std::uint64_t lo;
        friend bool operator<(const Key& a, const Key& b) noexcept {
            return a.length_class != b.length_class ? a.length_class < b.length_class : a.lo < b.lo;
        }
    };
    struct Item {
        std::uint64_t hi; // end of the key span
        Span other;
        AccessRef ref;
        Span bytes; // byte_span(view)
        Tensor view;
    };
    using Map = std::multimap<Key, Item, std::less<Key>, PoolAllocator<std::pair<const Key, Item>>>;

public:
    using Handle = Map::iterator;
    using Parked = Map::node_type;

    explicit IntervalIndex(BlockPool& pool);

    Handle insert(Span key, Span other, AccessRef ref, const Tensor& view, Span bytes);
    void erase(Handle handle) noexcept;
    // Takes an item out of every query, with its node.
    Parked park(Handle handle) noexcept;
    // Puts a parked item of this index back. REQUIRES !parked.empty().
    Handle unpark(Parked&& parked) noexcept;

    // Calls f(AccessRef, const Tensor& view, Span bytes) once for every live item whose key span meets `key` and whose other
    // span meets `other`. f must not insert, erase, park or unpark.
    template <class F>
    void for_each(Span key, Span other, F&& f) const;

    // Live items.
    std::size_t size() const noexcept { return items_.size(); }

private:
    static constexpr std::uint32_t CLASSES = 64;

    void count_in(std::uint8_t length_class) noexcept;
    void count_out(std::uint8_t length_class) noexcept;

    Map items_;
    std::array<std::uint32_t, CLASSES> class_size_{};
    std::uint64_t class_mask_ = 0; // bit c set while class c holds a live item
};

template <class F>
void IntervalIndex::for_each(Span key, Span other, F&& f) const {
    for (std::uint64_t mask = class_mask_; mask != 0; mask &= mask - 1) {
        const auto c = static_cast<std::uint8_t>(__builtin_ctzll(mask));
        // Longest length of class c, 2^(c+1) - 1: an item meeting `key` starts at or after key.lo minus it.
        const std::uint64_t reach = c + 1U >= CLASSES ? UINT64_MAX : (std::uint64_t{2} << c) - 1;
        const std::uint64_t from = key.lo > reach ? key.lo - reach : 0;
        for (auto it = items_.lower_bound(Key{c, from}); it != items_.end(); ++it) {
            if (it->first.length_class != c || it->first.lo >= key.hi) {
                break;
            }
            const Item& item = it->second;
            if (item.hi > key.lo && spans_meet(item.other, other)) {
                f(item.ref, item.view, item.bytes);
            }
        }
    }
}

} // namespace canopy::scheduler::detail
