#include "scheduler/detail/interval_index.h"

#include <bit>
#include <cstring>
#include <iterator>
#include <utility>

namespace canopy::scheduler::detail {
namespace {

// Class c holds lengths in [2^c, 2^(c+1)); a length of 0 counts as 1.
std::uint8_t length_class(Span s) noexcept {
    const std::uint64_t length = s.hi > s.lo ? s.hi - s.lo : 1;
    return static_cast<std::uint8_t>(std::bit_width(length) - 1);
}

} // namespace

static_assert(offsetof(Tensor, strides) + sizeof(Tensor::strides) == sizeof(Tensor), "view fields end the Tensor");

ViewFields ViewFields::of(const Tensor& t) noexcept {
    ViewFields v;
    std::memcpy(v.raw.data(), &t.byte_offset, BYTES);
    return v;
}

Tensor ViewFields::with_buffer(const BufferDescriptor& buffer) const noexcept {
    Tensor t;
    t.buffer = buffer;
    std::memcpy(&t.byte_offset, raw.data(), BYTES);
    return t;
}

IntervalIndex::IntervalIndex(BlockPool& pool) : items_(PoolAllocator<Map::value_type>(&pool)) {}

IntervalIndex::Handle IntervalIndex::insert(Span key, Span other, AccessRef ref, const Tensor& view, Span bytes) {
    const std::uint8_t c = length_class(key);
    const Handle handle = items_.emplace(key_of(c, key.lo), Item{key.hi, other, ref, bytes, ViewFields::of(view)});
    class_mask_ |= std::uint64_t{1} << c;
    return handle;
}

void IntervalIndex::erase(Handle handle) noexcept {
    const std::uint8_t c = class_of(handle->first);
    const bool last = last_of_class(handle);
    items_.erase(handle);
    forget_class_if(last, c);
}

IntervalIndex::Parked IntervalIndex::park(Handle handle) noexcept {
    const std::uint8_t c = class_of(handle->first);
    const bool last = last_of_class(handle);
    Parked parked = items_.extract(handle);
    forget_class_if(last, c);
    return parked;
}

IntervalIndex::Handle IntervalIndex::unpark(Parked&& parked) noexcept {
    const std::uint8_t c = class_of(parked.key());
    const Handle live = items_.insert(std::move(parked));
    class_mask_ |= std::uint64_t{1} << c;
    return live;
}

// The items of one class are neighbours in key order: the item is the last of its class when neither
// neighbour shares it.
bool IntervalIndex::last_of_class(Handle handle) const noexcept {
    const std::uint8_t c = class_of(handle->first);
    const bool before = handle != items_.begin() && class_of(std::prev(handle)->first) == c;
    const bool after = std::next(handle) != items_.end() && class_of(std::next(handle)->first) == c;
    return !before && !after;
}

void IntervalIndex::forget_class_if(bool last, std::uint8_t c) noexcept {
    if (last) {
        class_mask_ &= ~(std::uint64_t{1} << c);
    }
}

} // namespace canopy::scheduler::detail
