#pragma once
// AccessIndex: the outstanding tensor accesses of every buffer, found by the bytes they may touch.
//
// Accesses are grouped by buffer identity. Within one buffer:
//   - the linear group keys an access by its bounding byte range;
//   - up to MAX_PITCH_GROUPS pitch groups hold the views that have a pitched footprint (footprint.h) of
//     their pitch, as rectangles: a view at least half a row wide is keyed by its rows, a narrower one by
//     its columns, and each carries the other span as a filter. Row blocks of a matrix then meet only the
//     row blocks they share rows with, and column blocks only those they share columns with. A view with
//     no pitched footprint, or whose pitch finds every pitch group taken, goes to the linear group;
//   - reads and writes are indexed apart, so a reading access looks at writes only.
// A query turns the view into the coordinates of each group of its buffer (its own rectangle in the group
// of its pitch, its byte range as a rectangle in any other, its byte range in the linear group). It visits
// each live access at most once, and every one that tensor_overlap does not call disjoint and whose
// footprints are not disjoint (footprints_disjoint).
//
// A parked access is out of every query; its node waits in a parking slot and it keeps its buffer's entry,
// so that unparking allocates nothing. reserve_parking(n) makes the next n parks allocate nothing.
//
// Ownership: the index owns a copy of every view: the view fields per access, and per buffer the descriptor
// of its first access, with which a candidate's Tensor is rebuilt. That descriptor names the candidate's
// identity; the scheduler's decisions read no other descriptor field. The index also owns a BlockPool for
// its nodes. Lifetime: a Handle stays valid until its access is erased; the buffer's entry is dropped with
// its last access, live or parked.
// Thread safety: none; the owner serializes all calls.

#include "protocol/tensor.h"
#include "scheduler/detail/block_pool.h"
#include "scheduler/detail/footprint.h"
#include "scheduler/detail/interval_index.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <unordered_map>
#include <vector>

namespace canopy::scheduler::detail {

// Pitch groups per buffer, besides the linear one. A buffer seen through more pitches than this indexes
// the views of the others by byte range.
inline constexpr std::size_t MAX_PITCH_GROUPS = 4;

class AccessIndex {
public:
    // The four IntervalIndexes of a group: [writes][keyed by rows].
    struct Group {
        Group(std::uint64_t group_pitch, BlockPool& pool);
        std::uint64_t pitch; // 0 for the linear group
        std::array<std::array<IntervalIndex, 2>, 2> by;
    };
    // The accesses of one buffer.
    struct Buffer {
        CanonicalIdentity identity;
        BufferDescriptor descriptor; // of the first access; the views of the others share its identity
        std::vector<Group> groups;   // groups[0] is linear; capacity 1 + MAX_PITCH_GROUPS, never reallocated
        std::size_t size = 0;        // live and parked accesses
    };

    // Where one access sits. Trivially copyable; null (buffer == nullptr) once erased.
    struct Handle {
        Buffer* buffer = nullptr;
        IntervalIndex::Handle item{}; // while live
        std::uint32_t parking = 0;    // while parked: the slot in parked_
        std::uint8_t group = 0;
        bool writes = false;
        bool by_rows = false;
        bool parked = false;
    };

    AccessIndex() : pool_(std::make_unique<BlockPool>()) {}

    // The entry of a buffer with at least one access, or nullptr. Valid until that buffer's last access is
    // erased; inserting into other buffers does not move it.
    Buffer* find(const CanonicalIdentity& identity) noexcept;

    // REQUIRES footprint == footprint_of(view), and `buffer` == find(view's identity) or nullptr.
    Handle insert(Buffer* buffer, const Tensor& view, const Footprint& footprint, bool writes, AccessRef ref);
    Handle insert(const Tensor& view, const Footprint& footprint, bool writes, AccessRef ref) {
        return insert(nullptr, view, footprint, writes, ref);
    }
    // Removes a live or parked access and nulls the handle.
    void erase(Handle& handle) noexcept;
    // Room for `n` more parked accesses, so that the next n calls of park() allocate nothing.
    void reserve_parking(std::size_t n);
    // Takes a live access out of every query. REQUIRES room reserved by reserve_parking.
    void park(Handle& handle) noexcept;
    // Puts a parked access back into the queries; allocates nothing.
    void unpark(Handle& handle) noexcept;
    // The view of a live or parked access. REQUIRES handle.buffer != nullptr.
    Tensor view_of(const Handle& handle) const noexcept {
        const ViewFields& view =
            handle.parked ? IntervalIndex::view_of(parked_[handle.parking]) : IntervalIndex::view_of(handle.item);
        return view.with_buffer(handle.buffer->descriptor);
    }

    // Calls f(AccessRef, const Tensor& view, Span bytes) once for every live access of the buffer
    // `identity` that may share a byte with a view of that footprint: every write, and every read too when
    // `include_reads`. f must not change the index.
    template <class F>
    void for_each_candidate(const Buffer& buffer, const Footprint& footprint, bool include_reads, F&& f) const;
    template <class F>
    void for_each_candidate(const CanonicalIdentity& identity, const Footprint& footprint, bool include_reads,
                            F&& f) const {
        const auto found = buffers_.find(identity);
        if (found != buffers_.end()) {
            for_each_candidate(found->second, footprint, include_reads, f);
        }
    }

    // Buffers with at least one access, live or parked.
    std::size_t buffers() const noexcept { return buffers_.size(); }
    // Live accesses, over all buffers.
    std::size_t size() const noexcept { return size_; }
    // Returns the node storage to the system. REQUIRES buffers() == 0.
    void release_storage() noexcept;

private:
    // A multiply-xorshift mix of the identity's four words: a few cycles where IdentityHash walks 32 bytes.
    struct QuickHash {
        std::size_t operator()(const CanonicalIdentity& id) const noexcept;
    };
    struct SameIdentity {
        bool operator()(const CanonicalIdentity& a, const CanonicalIdentity& b) const noexcept {
            return same_identity(a, b);
        }
    };

    static Rect query_rect(const Group& group, const Footprint& footprint) noexcept;
    std::uint8_t group_for(Buffer& buffer, const std::optional<Pitched>& pitched);
    static IntervalIndex& index_of(const Handle& handle) noexcept;

    std::unique_ptr<BlockPool> pool_; // at a fixed address: the maps' allocators point at it
    std::unordered_map<CanonicalIdentity, Buffer, QuickHash, SameIdentity> buffers_;
    std::vector<IntervalIndex::Parked> parked_; // parking slots; an empty one is free
    std::vector<std::uint32_t> free_parking_;   // capacity >= parked_.size(), so freeing never allocates
    std::size_t size_ = 0;
};

template <class F>
void AccessIndex::for_each_candidate(const Buffer& buffer, const Footprint& footprint, bool include_reads,
                                     F&& f) const {
    const auto visit = [&](AccessRef ref, const ViewFields& view, Span bytes) {
        f(ref, view.with_buffer(buffer.descriptor), bytes);
    };
    for (const Group& group : buffer.groups) {
        const Rect q = query_rect(group, footprint);
        for (std::size_t writes = include_reads ? 0 : 1; writes < 2; ++writes) {
            if (!group.by[writes][0].empty()) {
                group.by[writes][0].for_each(q.cols, q.rows, visit);
            }
            if (!group.by[writes][1].empty()) {
                group.by[writes][1].for_each(q.rows, q.cols, visit);
            }
        }
    }
}

} // namespace canopy::scheduler::detail
