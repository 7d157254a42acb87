#pragma once
// TaskTable: the records of the unfinished tasks, in slots reused after a task finishes, the map from
// TaskId to slot, and the cell pools that hold each task's lists (accesses, dependents, pruned accesses).
//
// A slot is named together with the submission number of the task in it (a Link), so a link kept by
// another task goes stale, and is recognized as stale, once its task finishes and the slot is reused.
// Nodes live in chunks of CHUNK_NODES that never move. clear() returns every byte to the allocator.
//
// Ownership: the table owns the records and the pools. Lifetime: a Node& stays valid until clear(); a
// value from a pool until the next append to that pool.
// Thread safety: none; the owner serializes all calls.

#include "scheduler/detail/access_index.h"
#include "scheduler/detail/cell_pool.h"
#include "scheduler/detail/id_map.h"
#include "scheduler/task_state.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace canopy::scheduler::detail {

// A task in a slot; valid while the slot's node carries this submission number.
// `ordered`: on a dependent's link, the edge is enforced by the lane both tasks run on (Scheduler, "Lanes"), so
// the dependent no longer counts it in `blocking`.
struct Link {
    std::uint32_t slot;
    std::uint64_t seq;
    bool ordered = false;
};

// An access of an older task that a covering write of this task parked (took out of the queries): the
// owner's link and the cell of its handle.
struct PrunedAccess {
    std::uint64_t owner_seq;
    std::uint32_t owner_slot;
    std::uint32_t access;
    Link owner() const noexcept { return {owner_slot, owner_seq}; }
};

struct Node {
    TaskId id = 0;
    std::uint64_t seq = 0;      // submission order, from 1; 0 in a free slot
    std::uint32_t pending = 0;  // unfinished tasks this one depends on
    std::uint32_t blocking = 0; // of those, the ones its lane does not order: it is READY when this is 0
    Lane lane = NO_LANE;
    bool tolerant = false; // a failed dependency is finished for it, not a failure (Scheduler::add)
    TaskState state = TaskState::COMPLETED;
    List accesses;   // cells of TaskTable::handles, one per tensor argument in order; null once erased
    List dependents; // cells of TaskTable::links: tasks waiting for this one, in submission order
    List pruned;     // cells of TaskTable::pruned: accesses this task's writes cover
    List after;      // cells of TaskTable::after: ids of the predecessors its lane orders, in the order ordered
    std::string name;
};

class TaskTable {
public:
    // A fresh slot for `id` with the given submission number; the node's other fields are empty. Throws
    // std::logic_error when `id` is already in the table.
    std::uint32_t allocate(TaskId id, std::uint64_t seq);
    // Empties the slot, gives its lists back and forgets its id; allocates nothing.
    void release(std::uint32_t slot) noexcept;
    // Frees all storage. REQUIRES no live task.
    void clear() noexcept;

    std::optional<std::uint32_t> find(TaskId id) const noexcept { return slot_of_.find(id); }
    Node& node(std::uint32_t slot) noexcept { return chunks_[slot / CHUNK_NODES][slot % CHUNK_NODES]; }
    const Node& node(std::uint32_t slot) const noexcept { return chunks_[slot / CHUNK_NODES][slot % CHUNK_NODES]; }
    // The node `link` names, or nullptr once that task has finished.
    Node* live(const Link& link) noexcept;

    std::size_t size() const noexcept { return slot_of_.size(); }

    CellPool<AccessIndex::Handle> handles;
    CellPool<Link> links;
    CellPool<PrunedAccess> pruned;
    CellPool<TaskId> after;

private:
    static constexpr std::uint32_t CHUNK_NODES = 256;

    std::vector<std::unique_ptr<Node[]>> chunks_;
    std::uint32_t slots_ = 0; // slots handed out so far, in use or free
    std::vector<std::uint32_t> free_;
    IdMap slot_of_;
};

} // namespace canopy::scheduler::detail
