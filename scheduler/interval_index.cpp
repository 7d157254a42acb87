#include "scheduler/detail/interval_index.h"

#include <bit>
#include <utility>

namespace canopy::scheduler::detail {
namespace {

// Class c holds lengths in [2^c, 2^(c+1)); a length of 0 counts as 1.
std::uint8_t length_class(Span s) noexcept {
    const std::uint64_t length = s.hi > s.lo ? s.hi - s.lo : 1;
    return static_cast<std::uint8_t>(std::bit_width(length) - 1);
}

} // namespace

IntervalIndex::IntervalIndex(BlockPool& pool) : items_(PoolAllocator<Map::value_type>(&pool)) {}

IntervalIndex::Handle IntervalIndex::insert(Span key, Span other, AccessRef ref, const Tensor& view, Span bytes) {
    const std::uint8_t c = length_class(key);
    const Handle handle = items_.emplace(Key{c, key.lo}, Item{key.hi, other, ref, bytes, view});
    count_in(c);
    return handle;
}

void IntervalIndex::erase(Handle handle) noexcept {
    const std::uint8_t c = handle->first.length_class;
    items_.erase(handle);
    count_out(c);
}

IntervalIndex::Parked IntervalIndex::park(Handle handle) noexcept {
    const std::uint8_t c = handle->first.length_class;
    Parked parked = items_.extract(handle);
    count_out(c);
    return parked;
}

IntervalIndex::Handle IntervalIndex::unpark(Parked&& parked) noexcept {
    const std::uint8_t c = parked.key().length_class;
    const Handle live = items_.insert(std::move(parked));
    count_in(c);
    return live;
}

void IntervalIndex::count_in(std::uint8_t c) noexcept {
    ++class_size_[c];
    class_mask_ |= std::uint64_t{1} << c;
}

void IntervalIndex::count_out(std::uint8_t c) noexcept {
    if (--class_size_[c] == 0) {
        class_mask_ &= ~(std::uint64_t{1} << c);
    }
}

} // namespace canopy::scheduler::detail
