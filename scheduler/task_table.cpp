#include "scheduler/detail/task_table.h"

#include <algorithm>
#include <stdexcept>

namespace canopy::scheduler::detail {

std::uint32_t TaskTable::allocate(TaskId id, std::uint64_t seq) {
    if (free_.empty()) {
        if (slots_ % CHUNK_NODES == 0) {
            // free_ can hold every slot, so release() never allocates.
            if (free_.capacity() < std::size_t{slots_} + CHUNK_NODES) {
                free_.reserve(std::max<std::size_t>(2 * free_.capacity(), std::size_t{slots_} + CHUNK_NODES));
            }
            chunks_.push_back(std::make_unique<Node[]>(CHUNK_NODES));
        }
        free_.push_back(slots_++);
    }
    const std::uint32_t slot = free_.back();
    if (!slot_of_.insert(id, slot)) {
        throw std::logic_error("task " + std::to_string(id) + " is already scheduled");
    }
    free_.pop_back();
    Node& n = node(slot);
    n.id = id;
    n.seq = seq;
    return slot;
}

void TaskTable::release(std::uint32_t slot) noexcept {
    Node& n = node(slot);
    slot_of_.erase(n.id);
    n.seq = 0;
    n.pending = 0;
    n.blocking = 0;
    n.lane = NO_LANE;
    n.tolerant = false;
    n.state = TaskState::COMPLETED;
    n.name.clear();
    handles.release(n.accesses);
    links.release(n.dependents);
    pruned.release(n.pruned);
    after.release(n.after);
    free_.push_back(slot);
}

void TaskTable::clear() noexcept {
    chunks_ = std::vector<std::unique_ptr<Node[]>>();
    slots_ = 0;
    free_ = std::vector<std::uint32_t>();
    slot_of_.clear();
    handles.clear();
    links.clear();
    pruned.clear();
    after.clear();
}

Node* TaskTable::live(const Link& link) noexcept {
    if (link.slot >= slots_) {
        return nullptr;
    }
    Node& n = node(link.slot);
    return n.seq == link.seq && n.seq != 0 ? &n : nullptr;
}

} // namespace canopy::scheduler::detail
