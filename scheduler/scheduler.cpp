// Pruning. When a write W of a new task T covers an outstanding access A of an older task U (every byte of
// A is a byte of W), T depends on U, and A is parked: taken out of the queries. No ordering is lost:
//   - a later task X that conflicts with A shares a byte with A, hence with W; W writes, so X conflicts
//     with W and depends on T (or, if W is parked in turn, on the task that covers W), and T waits for U;
//   - T completes only after U has finished, so X never sees T finished while U still runs;
//   - if T fails (or is cancelled) first, every X that reached U through W fails with it, and T puts A
//     back into the queries for the tasks added after that.
// A chain of writes over one view therefore keeps one access in the index, and a writer after N readers
// parks all N of them.

#include "scheduler/scheduler.h"

#include "protocol/overlap.h"

#include <algorithm>
#include <iterator>
#include <stdexcept>

namespace canopy::scheduler {
namespace {

using detail::AccessIndex;
using detail::AccessRef;
using detail::Link;
using detail::Node;

// Grows `v` geometrically so that `extra` more elements fit without a reallocation.
template <class T>
void reserve_more(std::vector<T>& v, std::size_t extra) {
    if (v.capacity() - v.size() < extra) {
        v.reserve(std::max(v.size() + extra, 2 * v.capacity()));
    }
}

std::string task_label(TaskId id) {
    return "task " + std::to_string(id);
}

} // namespace

const char* to_string(TaskState state) noexcept {
    switch (state) {
    case TaskState::WAITING:
    case TaskState::READY:
        return "queued";
    case TaskState::RUNNING:
        return "running";
    case TaskState::COMPLETED:
        return "completed";
    case TaskState::FAILED:
        return "failed";
    }
    return "unknown";
}

bool Scheduler::add(TaskId id, std::string_view name, std::span<const TensorArg> args, Lane lane, bool tolerant) {
    for (std::size_t i = 0; i < args.size(); ++i) {
        if (!is_valid(args[i].tag)) {
            throw std::logic_error("add: " + task_label(id) + " args[" + std::to_string(i) + "] has tag " +
                                   std::to_string(static_cast<unsigned>(args[i].tag)) + ", not input, output or inout");
        }
    }
    const std::uint32_t slot = tasks_.allocate(id, next_seq_++);
    try {
        Node& node = tasks_.node(slot);
        node.name.assign(name);
        node.lane = lane;
        node.tolerant = tolerant;
        footprints_.clear();
        buffers_.clear();
        for (const TensorArg& arg : args) {
            tasks_.handles.append(node.accesses, AccessIndex::Handle{});
            footprints_.push_back(detail::footprint_of(arg.tensor));
            buffers_.push_back(index_.find(arg.tensor.buffer.identity));
        }
        link_dependencies(slot, args);
        index_accesses(slot, args);
        tasks_.pruned.reserve(prunable_.size());
        index_.reserve_parking(prunable_.size());
        ready_.reserve_added(1);
    } catch (...) {
        abandon(slot);
        throw;
    }
    // Nothing below allocates or throws.
    Node& node = tasks_.node(slot);
    for (const AccessRef& ref : prunable_) {
        AccessIndex::Handle& covered = tasks_.handles[ref.access];
        if (!covered.parked) { // two writes of this task may cover one access
            index_.park(covered);
            tasks_.pruned.append(node.pruned, {tasks_.node(ref.slot).seq, ref.slot, ref.access});
        }
    }
    node.state = node.blocking == 0 ? TaskState::READY : TaskState::WAITING;
    if (node.state == TaskState::READY) {
        ready_.push_added({node.seq, slot});
    }
    return node.state == TaskState::READY;
}

// Links the task at `slot` after every outstanding access it conflicts with, and lists in prunable_ the
// accesses its writes cover.
void Scheduler::link_dependencies(std::uint32_t slot, std::span<const TensorArg> args) {
    Node& node = tasks_.node(slot);
    prunable_.clear();
    for (std::size_t i = 0; i < args.size(); ++i) {
        const Tensor& mine = args[i].tensor;
        const detail::Footprint& footprint = footprints_[i];
        const bool writes = tag_writes(args[i].tag);
        const auto visit = [&](AccessRef ref, const Tensor& theirs, detail::Span their_bytes) {
            const Overlap overlap = detail::overlap_of(mine, theirs);
            // COVERED views share a byte; footprints can only separate a PARTIAL pair.
            if (overlap == Overlap::NONE ||
                (overlap == Overlap::PARTIAL && detail::footprints_disjoint(footprint, detail::footprint_of(theirs)))) {
                return;
            }
            Node& owner = tasks_.node(ref.slot);
            const detail::List& edges = owner.dependents;
            if (edges.empty() || tasks_.links[edges.tail].seq != node.seq) { // one edge per pair of tasks
                const bool ordered =
                    node.lane != NO_LANE && owner.lane == node.lane && owner.state == TaskState::RUNNING;
                tasks_.links.append(owner.dependents, Link{slot, node.seq, ordered});
                ++node.pending;
                if (ordered) {
                    tasks_.after.append(node.after, owner.id);
                } else {
                    ++node.blocking;
                }
            }
            if (writes && detail::covers(mine, footprint.bytes, theirs, their_bytes, overlap)) {
                prunable_.push_back(ref);
            }
        };
        if (buffers_[i] != nullptr) {
            index_.for_each_candidate(*buffers_[i], footprint, writes, visit);
        }
    }
}

void Scheduler::index_accesses(std::uint32_t slot, std::span<const TensorArg> args) {
    std::uint32_t cell = tasks_.node(slot).accesses.head;
    for (std::size_t i = 0; i < args.size(); ++i, cell = tasks_.handles.next(cell)) {
        tasks_.handles[cell] =
            index_.insert(buffers_[i], args[i].tensor, footprints_[i], tag_writes(args[i].tag), AccessRef{slot, cell});
    }
}

// Undoes a partly added task. Links that older tasks hold to it go stale with its slot.
void Scheduler::abandon(std::uint32_t slot) noexcept {
    unindex(tasks_.node(slot));
    tasks_.release(slot);
}

std::optional<TaskId> Scheduler::pop_ready() {
    while (const std::optional<detail::ReadyQueue::Entry> top = ready_.top()) {
        Node* node = tasks_.live(Link{top->slot, top->seq});
        if (node == nullptr || node->state != TaskState::READY) {
            ready_.pop();
            continue;
        }
        if (node->lane != NO_LANE) {
            // Room for order_dependents before anything changes.
            ready_.reserve_woken(node->dependents.size);
            tasks_.after.reserve(node->dependents.size);
        }
        ready_.pop();
        node->state = TaskState::RUNNING;
        if (node->lane != NO_LANE) {
            order_dependents(*node);
        }
        return node->id;
    }
    return std::nullopt;
}

// `node` was just handed out: its WAITING dependents of the same lane no longer wait for it. REQUIRES room for
// one woken entry and one `after` cell per dependent.
void Scheduler::order_dependents(Node& node) noexcept {
    tasks_.links.for_each(node.dependents, [&](Link& link) {
        Node* dependent = tasks_.live(link);
        if (dependent == nullptr || link.ordered || dependent->lane != node.lane ||
            dependent->state != TaskState::WAITING) {
            return;
        }
        link.ordered = true;
        tasks_.after.append(dependent->after, node.id);
        if (--dependent->blocking == 0) {
            dependent->state = TaskState::READY;
            ready_.push_woken({link.seq, link.slot});
        }
    });
}

void Scheduler::ordered_after(TaskId id, std::vector<TaskId>& out) {
    const Node& node = tasks_.node(checked_slot(id, "ordered_after"));
    reserve_more(out, node.after.size);
    tasks_.after.for_each(node.after, [&](TaskId predecessor) { out.push_back(predecessor); });
}

void Scheduler::complete(TaskId id, std::vector<TaskId>& now_ready) {
    const std::uint32_t slot = checked_slot(id, "complete");
    Node& node = tasks_.node(slot);
    if (node.state != TaskState::RUNNING) {
        throw std::logic_error("complete: " + task_label(id) + " is " + to_string(node.state) + ", not running");
    }
    const std::size_t dependents = node.dependents.size;
    reserve_more(now_ready, dependents);
    ready_.reserve_woken(dependents);
    tasks_.links.for_each(node.dependents, [&](const Link& link) {
        Node* dependent = tasks_.live(link);
        if (dependent != nullptr && count_finished(link, *dependent)) {
            now_ready.push_back(dependent->id);
        }
    });
    finish(slot);
}

void Scheduler::fail(TaskId id, ErrorCode code, std::vector<FailedTask>& failed_dependents) {
    const std::uint32_t root = checked_slot(id, "fail");
    std::vector<TaskState> before;
    const std::vector<std::uint32_t> cascade = collect_dependents(root, before);
    std::vector<std::pair<std::uint32_t, Link>> covered;
    try {
        const Node& failed = tasks_.node(root);
        const std::string message = "dependency '" + failed.name + "' (" + task_label(failed.id) +
                                    ") failed: " + std::string(error_code_name(code));
        std::vector<FailedTask> out;
        out.reserve(cascade.size() - 1);
        for (std::size_t k = 1; k < cascade.size(); ++k) {
            out.emplace_back(tasks_.node(cascade[k]).id, message);
        }
        ready_.reserve_woken(tolerant_edges(cascade));
        covered = covered_edges(cascade);
        reserve_more(failed_dependents, out.size());
        std::move(out.begin(), out.end(), std::back_inserter(failed_dependents));
    } catch (...) {
        unmark(cascade, before);
        throw;
    }
    // Nothing below allocates or throws. Every task of the cascade is FAILED before any of them puts accesses
    // back, so an access of a failing task is never put back. The covered tasks' edges go in before the failed
    // ones are counted finished, so that no tolerant dependent is READY in between.
    for (const auto& [owner, link] : covered) {
        Node& dependent = tasks_.node(link.slot);
        tasks_.links.append(tasks_.node(owner).dependents, link);
        ++dependent.pending;
        ++dependent.blocking;
    }
    for (const std::uint32_t slot : cascade) {
        release_tolerant(tasks_.node(slot));
    }
    for (const std::uint32_t slot : cascade) {
        unindex(tasks_.node(slot));
        reinstate_pruned(tasks_.node(slot));
    }
    for (const std::uint32_t slot : cascade) {
        tasks_.release(slot);
    }
    if (tasks_.size() == 0) {
        release_storage();
    }
}

// Marks FAILED `root` and every WAITING or READY task that depends on it transitively; returns them, root
// first, then in submission order, and their states before in `before` (by position). On an exception, every
// mark is undone.
std::vector<std::uint32_t> Scheduler::collect_dependents(std::uint32_t root, std::vector<TaskState>& before) {
    std::vector<std::uint32_t> cascade;
    before.clear();
    try {
        before.push_back(tasks_.node(root).state);
        cascade.push_back(root);
        tasks_.node(root).state = TaskState::FAILED;
        for (std::size_t k = 0; k < cascade.size(); ++k) {
            tasks_.links.for_each(tasks_.node(cascade[k]).dependents, [&](const Link& link) {
                Node* dependent = tasks_.live(link);
                if (dependent != nullptr && !dependent->tolerant &&
                    (dependent->state == TaskState::WAITING || dependent->state == TaskState::READY)) {
                    before.push_back(dependent->state);
                    cascade.push_back(link.slot);
                    dependent->state = TaskState::FAILED;
                }
            });
        }
        // Root first, then by submission order; `before` follows its tasks.
        std::vector<std::pair<std::uint32_t, TaskState>> marked(cascade.size());
        for (std::size_t k = 0; k < cascade.size(); ++k) {
            marked[k] = {cascade[k], before[k]};
        }
        std::sort(marked.begin() + 1, marked.end(),
                  [this](const auto& a, const auto& b) { return tasks_.node(a.first).seq < tasks_.node(b.first).seq; });
        for (std::size_t k = 0; k < cascade.size(); ++k) {
            cascade[k] = marked[k].first;
            before[k] = marked[k].second;
        }
    } catch (...) {
        unmark(cascade, before);
        throw;
    }
    return cascade;
}

std::size_t Scheduler::tolerant_edges(const std::vector<std::uint32_t>& cascade) noexcept {
    std::size_t edges = 0;
    for (const std::uint32_t slot : cascade) {
        tasks_.links.for_each(tasks_.node(slot).dependents, [&](const Link& link) {
            const Node* dependent = tasks_.live(link);
            edges += dependent != nullptr && dependent->tolerant && dependent->state != TaskState::FAILED ? 1 : 0;
        });
    }
    return edges;
}

std::vector<std::pair<std::uint32_t, Link>> Scheduler::covered_edges(const std::vector<std::uint32_t>& cascade) {
    std::vector<detail::PrunedAccess> covered;
    std::vector<Link> tolerant;
    for (const std::uint32_t slot : cascade) {
        const Node& failing = tasks_.node(slot);
        tasks_.pruned.for_each(failing.pruned, [&](const detail::PrunedAccess& pruned) {
            const Node* owner = tasks_.live(pruned.owner());
            if (owner != nullptr && owner->state != TaskState::FAILED &&
                tasks_.handles[pruned.access].buffer != nullptr) {
                covered.push_back(pruned);
            }
        });
        tasks_.links.for_each(failing.dependents, [&](const Link& link) {
            const Node* dependent = tasks_.live(link);
            if (dependent != nullptr && dependent->tolerant && dependent->state == TaskState::WAITING &&
                std::none_of(tolerant.begin(), tolerant.end(), [&](const Link& t) { return t.slot == link.slot; })) {
                tolerant.push_back(Link{link.slot, link.seq, false});
            }
        });
    }
    // An edge where a tolerant dependent's view may share a byte with a covered access and one of the two writes,
    // as add() would have linked them had the access not been covered; one per pair of tasks.
    std::vector<std::pair<std::uint32_t, Link>> edges;
    for (const Link& dependent : tolerant) {
        tasks_.handles.for_each(tasks_.node(dependent.slot).accesses, [&](const AccessIndex::Handle& mine) {
            if (mine.buffer == nullptr) {
                return;
            }
            const Tensor my_view = index_.view_of(mine);
            for (const detail::PrunedAccess& pruned : covered) {
                const AccessIndex::Handle& theirs = tasks_.handles[pruned.access];
                if (theirs.buffer != mine.buffer || (!mine.writes && !theirs.writes) ||
                    pruned.owner_seq >= dependent.seq ||
                    std::any_of(edges.begin(), edges.end(),
                                [&](const auto& e) {
                                    return e.first == pruned.owner_slot && e.second.slot == dependent.slot;
                                }) ||
                    detail::overlap_of(my_view, index_.view_of(theirs)) == Overlap::NONE) {
                    continue;
                }
                edges.emplace_back(pruned.owner_slot, dependent);
            }
        });
    }
    tasks_.links.reserve(edges.size());
    return edges;
}

void Scheduler::release_tolerant(Node& node) noexcept {
    tasks_.links.for_each(node.dependents, [&](const Link& link) {
        Node* dependent = tasks_.live(link);
        if (dependent != nullptr && dependent->tolerant && dependent->state != TaskState::FAILED) {
            (void)count_finished(link, *dependent);
        }
    });
}

bool Scheduler::count_finished(const Link& link, Node& dependent) noexcept {
    --dependent.pending;
    // An ordered edge no longer counted in `blocking`; a RUNNING or READY dependent has no other kind.
    if (link.ordered || --dependent.blocking != 0 || dependent.state != TaskState::WAITING) {
        return false;
    }
    dependent.state = TaskState::READY;
    ready_.push_woken({link.seq, link.slot});
    return true;
}

// Undoes the marks of collect_dependents: every task back to the state it had.
void Scheduler::unmark(const std::vector<std::uint32_t>& cascade, const std::vector<TaskState>& before) noexcept {
    for (std::size_t k = 0; k < cascade.size() && k < before.size(); ++k) {
        tasks_.node(cascade[k]).state = before[k];
    }
}

void Scheduler::unindex(Node& node) noexcept {
    tasks_.handles.for_each(node.accesses, [&](AccessIndex::Handle& handle) {
        if (handle.buffer != nullptr) {
            index_.erase(handle);
        }
    });
}

// Puts back the accesses this failing task parked, for the owners that are not failing with it.
void Scheduler::reinstate_pruned(Node& node) noexcept {
    tasks_.pruned.for_each(node.pruned, [&](const detail::PrunedAccess& pruned) {
        const Node* owner = tasks_.live(pruned.owner());
        if (owner == nullptr || owner->state == TaskState::FAILED) {
            return;
        }
        AccessIndex::Handle& handle = tasks_.handles[pruned.access];
        if (handle.buffer != nullptr && handle.parked) {
            index_.unpark(handle);
        }
    });
}

void Scheduler::finish(std::uint32_t slot) noexcept {
    unindex(tasks_.node(slot));
    tasks_.release(slot);
    if (tasks_.size() == 0) {
        release_storage();
    }
}

void Scheduler::release_storage() noexcept {
    tasks_.clear();
    index_.release_storage();
    ready_.clear();
    prunable_ = std::vector<AccessRef>();
    footprints_ = std::vector<detail::Footprint>();
    buffers_ = std::vector<AccessIndex::Buffer*>();
}

std::uint32_t Scheduler::checked_slot(TaskId id, const char* operation) const {
    const std::optional<std::uint32_t> slot = tasks_.find(id);
    if (!slot) {
        throw std::logic_error(std::string(operation) + ": " + task_label(id) + " is unknown or already finished");
    }
    return *slot;
}

std::optional<TaskState> Scheduler::state(TaskId id) const {
    const std::optional<std::uint32_t> slot = tasks_.find(id);
    return slot ? std::optional<TaskState>(tasks_.node(*slot).state) : std::nullopt;
}

std::optional<std::size_t> Scheduler::waiting_for(TaskId id) const {
    const std::optional<std::uint32_t> slot = tasks_.find(id);
    return slot ? std::optional<std::size_t>(tasks_.node(*slot).blocking) : std::nullopt;
}

} // namespace canopy::scheduler
