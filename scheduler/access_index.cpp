#include "scheduler/detail/access_index.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace canopy::scheduler::detail {

AccessIndex::Group::Group(std::uint64_t group_pitch, BlockPool& pool)
    : pitch(group_pitch), by{{{IntervalIndex(pool), IntervalIndex(pool)}, {IntervalIndex(pool), IntervalIndex(pool)}}} {
}

std::size_t AccessIndex::QuickHash::operator()(const CanonicalIdentity& id) const noexcept {
    std::uint64_t owner[2];
    std::memcpy(owner, id.owner_instance.data(), sizeof owner);
    std::uint64_t h = owner[0] ^ (owner[1] * 0x9E3779B97F4A7C15ULL) ^ (id.buffer_id * 0xC2B2AE3D27D4EB4FULL) ^
                      (std::uint64_t{id.generation} << 32);
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ULL;
    h ^= h >> 32;
    return static_cast<std::size_t>(h);
}

Rect AccessIndex::query_rect(const Group& group, const Footprint& footprint) noexcept {
    if (group.pitch == 0) {
        return {{0, 1}, footprint.bytes};
    }
    if (footprint.pitched && footprint.pitched->pitch == group.pitch) {
        return footprint.pitched->rect;
    }
    return rect_of_span(footprint.bytes, group.pitch);
}

// The group a view with this footprint joins; creates its pitch group while fewer than MAX_PITCH_GROUPS
// exist.
std::uint8_t AccessIndex::group_for(Buffer& buffer, const std::optional<Pitched>& pitched) {
    if (!pitched) {
        return 0;
    }
    for (std::size_t g = 1; g < buffer.groups.size(); ++g) {
        if (buffer.groups[g].pitch == pitched->pitch) {
            return static_cast<std::uint8_t>(g);
        }
    }
    if (buffer.groups.size() < 1 + MAX_PITCH_GROUPS) {
        buffer.groups.emplace_back(pitched->pitch, *pool_);
        return static_cast<std::uint8_t>(buffer.groups.size() - 1);
    }
    return 0;
}

AccessIndex::Buffer* AccessIndex::find(const CanonicalIdentity& identity) noexcept {
    const auto found = buffers_.find(identity);
    return found == buffers_.end() ? nullptr : &found->second;
}

AccessIndex::Handle AccessIndex::insert(Buffer* hint, const Tensor& view, const Footprint& footprint, bool writes,
                                        AccessRef ref) {
    if (hint == nullptr) {
        hint = find(view.buffer.identity);
    }
    if (hint == nullptr) {
        Buffer fresh{view.buffer.identity, view.buffer, {}, 0};
        fresh.groups.reserve(1 + MAX_PITCH_GROUPS);
        fresh.groups.emplace_back(0, *pool_);
        hint = &buffers_.emplace(view.buffer.identity, std::move(fresh)).first->second;
    }
    Buffer& buffer = *hint;
    const std::uint8_t g = group_for(buffer, footprint.pitched);
    Group& group = buffer.groups[g];
    Rect rect{{0, 1}, footprint.bytes};
    bool by_rows = false;
    if (g != 0) {
        rect = footprint.pitched->rect;
        by_rows = 2 * (rect.cols.hi - rect.cols.lo) >= group.pitch;
    }
    IntervalIndex& index = group.by[writes][by_rows];
    const IntervalIndex::Handle item = by_rows ? index.insert(rect.rows, rect.cols, ref, view, footprint.bytes)
                                               : index.insert(rect.cols, rect.rows, ref, view, footprint.bytes);
    ++buffer.size;
    ++size_;
    return {&buffer, item, 0, g, writes, by_rows, false};
}

IntervalIndex& AccessIndex::index_of(const Handle& handle) noexcept {
    return handle.buffer->groups[handle.group].by[handle.writes][handle.by_rows];
}

void AccessIndex::erase(Handle& handle) noexcept {
    if (handle.parked) {
        parked_[handle.parking] = IntervalIndex::Parked();
        free_parking_.push_back(handle.parking);
    } else {
        index_of(handle).erase(handle.item);
        --size_;
    }
    Buffer& buffer = *handle.buffer;
    handle = Handle{};
    if (--buffer.size == 0) {
        const CanonicalIdentity identity = buffer.identity; // the key must outlive the erased entry
        buffers_.erase(identity);
    }
}

void AccessIndex::reserve_parking(std::size_t n) {
    if (free_parking_.size() >= n) {
        return;
    }
    const std::size_t want = parked_.size() + (n - free_parking_.size());
    if (parked_.capacity() < want) {
        parked_.reserve(std::max(want, 2 * parked_.capacity()));
    }
    if (free_parking_.capacity() < parked_.capacity()) {
        free_parking_.reserve(parked_.capacity());
    }
}

void AccessIndex::park(Handle& handle) noexcept {
    IntervalIndex::Parked node = index_of(handle).park(handle.item);
    if (free_parking_.empty()) {
        handle.parking = static_cast<std::uint32_t>(parked_.size());
        parked_.push_back(std::move(node));
    } else {
        handle.parking = free_parking_.back();
        free_parking_.pop_back();
        parked_[handle.parking] = std::move(node);
    }
    handle.parked = true;
    --size_;
}

void AccessIndex::unpark(Handle& handle) noexcept {
    handle.item = index_of(handle).unpark(std::move(parked_[handle.parking]));
    parked_[handle.parking] = IntervalIndex::Parked();
    free_parking_.push_back(handle.parking);
    handle.parked = false;
    ++size_;
}

void AccessIndex::release_storage() noexcept {
    buffers_ = decltype(buffers_)();
    parked_ = std::vector<IntervalIndex::Parked>();
    free_parking_ = std::vector<std::uint32_t>();
    pool_->release();
}

} // namespace canopy::scheduler::detail
