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
// Ownership: items hold a copy of their view's fields and an AccessRef; the nodes come from the BlockPool given at
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

// An access of a task: the task's slot in the task table and the cell of the access's handle there.
struct AccessRef {
    std::uint32_t slot;
    std::uint32_t access;
};

// The view fields of a Tensor (byte_offset through strides), without the buffer descriptor, which every
// access of one buffer shares. with_buffer() makes the Tensor again.
struct ViewFields {
    static constexpr std::size_t BYTES = sizeof(Tensor) - offsetof(Tensor, byte_offset);
    alignas(8) std::array<std::byte, BYTES> raw;

    static ViewFields of(const Tensor& t) noexcept;
    Tensor with_buffer(const BufferDescriptor& buffer) const noexcept;
};

class IntervalIndex {
    // (length class << 64) | start: one ordered run per class, by start.
    __extension__ typedef unsigned __int128 Key;
    static constexpr Key key_of(std::uint8_t length_class, std::uint64_t lo) noexcept {
        return (Key{length_class} << 64) | lo;
    }
    static constexpr std::uint8_t class_of(Key key) noexcept { return static_cast<std::uint8_t>(key >> 64); }
    struct Item {
        std::uint64_t hi; // end of the key span
        Span other;
        AccessRef ref;
        Span bytes; // byte_span of the view
        ViewFields view;
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
    // The view of a live item, and of a parked one.
    static const ViewFields& view_of(Handle handle) noexcept { return handle->second.view; }
    static const ViewFields& view_of(const Parked& parked) noexcept { return parked.mapped().view; }

    // Calls f(AccessRef, const ViewFields& view, Span bytes) once for every live item whose key span meets `key` and
    // whose other span meets `other`. f must not insert, erase, park or unpark.
    template <class F>
    void for_each(Span key, Span other, F&& f) const;

    // Live items.
    std::size_t size() const noexcept { return items_.size(); }
    bool empty() const noexcept { return class_mask_ == 0; }

private:
    static constexpr std::uint32_t CLASSES = 64;

    bool last_of_class(Handle handle) const noexcept;
    void forget_class_if(bool last, std::uint8_t length_class) noexcept;

    Map items_;
    std::uint64_t class_mask_ = 0; // bit c set while class c holds a live item
};

template <class F>
void IntervalIndex::for_each(Span key, Span other, F&& f) const {
    for (std::uint64_t mask = class_mask_; mask != 0; mask &= mask - 1) {
        const auto c = static_cast<std::uint8_t>(__builtin_ctzll(mask));
        // Longest length of class c, 2^(c+1) - 1: an item meeting `key` starts at or after key.lo minus it.
        const std::uint64_t reach = c + 1U >= CLASSES ? UINT64_MAX : (std::uint64_t{2} << c) - 1;
        const std::uint64_t from = key.lo > reach ? key.lo - reach : 0;
        const Key end = key_of(c, key.hi);
        for (auto it = items_.lower_bound(key_of(c, from)); it != items_.end() && it->first < end; ++it) {
            const Item& item = it->second;
            if (item.hi > key.lo && spans_meet(item.other, other)) {
                f(item.ref, item.view, item.bytes);
            }
        }
    }
}

} // namespace canopy::scheduler::detail
