#pragma once
// The parent's end of one child's mailbox (layout: protocol/mailbox.h). It owns the memfd and the
// mapping, writes frames in ring order, and collects results in the same order, or, for a child that runs
// frames side by side (set_collect_in_any_order), each as it is published.
//
// Thread safety: one thread at a time drives submit/poll/wait (the supervisor holds a mutex);
// activity(), wait_activity(), wake_waiters() and request_shutdown() may run on any thread.
// poll() and wait() never block the child; wait() spins briefly, then blocks on the futex word the
// child bumps per result. wake_waiters() lets another thread of the parent end such a wait early.

#include "ipc/futex.h"
#include "ipc/mapped_region.h"
#include "ipc/unique_fd.h"
#include "protocol/error.h"
#include "protocol/mailbox.h"

#include <cstdint>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>

namespace canopy::ipc {

struct Dispatch {
    std::uint64_t task_id = 0;
    std::string_view kernel;
    std::string_view target; // path below the child; empty for the child itself
    LaunchConfig launch{};
    std::span<const std::byte> blob;
    std::uint32_t timeout_ms = 0;
    std::span<const std::uint64_t> after{}; // task ids of earlier frames it is ordered behind (TaskFrame::after)
};

struct Completion {
    std::uint64_t task_id = 0;
    std::uint64_t dispatch_id = 0;
    ErrorCode code = ErrorCode::OK;
    std::string message;
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
};

// The endpoint can no longer be trusted (unknown state, trailer mismatch); what() says why.
class MailboxPoisoned : public std::runtime_error {
public:
    using std::runtime_error::runtime_error;
};

class MailboxParent {
public:
    // A fresh zeroed region in a memfd, header filled for child incarnation `generation`.
    explicit MailboxParent(std::uint32_t generation);

    int fd() const noexcept { return fd_.get(); }
    std::uint32_t generation() const noexcept { return generation_; }
    void set_child_pid(int pid) noexcept;

    // Collects each result as it is published instead of in ring order (default off). A nested or remote node
    // runs its frames on several workers at once, and a result held behind an older frame still running would
    // wait for it. Frames still go out in ring order: a frame in flight keeps its slot, so MAILBOX_FRAMES - 1
    // frames after one still running, submit waits for it. Call before the first submit.
    void set_collect_in_any_order(bool any_order) noexcept { any_order_ = any_order; }

    // True when the next frame in ring order is free.
    bool can_submit() const noexcept;
    // Frames submitted and not yet collected.
    std::size_t in_flight() const noexcept { return next_dispatch_ - next_complete_ - collected_ahead_; }
    // The dispatch id of the oldest frame in flight. REQUIRES in_flight() > 0.
    std::uint64_t oldest_in_flight() const noexcept { return next_complete_; }

    // Writes the next frame and publishes it READY. REQUIRES can_submit(). Throws std::invalid_argument
    // for a kernel, target, blob or `after` list that does not fit its field. Returns the dispatch id.
    std::uint64_t submit(const Dispatch& d);

    // The oldest in-flight result, if finished; in any order, the oldest finished one. Throws MailboxPoisoned.
    std::optional<Completion> poll();

    // Waits until a result poll() would take is published, wake_waiters() was called, or `timeout_ns`
    // passed (0 = no timeout). Spins up to `spin` iterations first. Returns whether a result is ready.
    bool wait(std::uint64_t timeout_ns, std::uint32_t spin = 2000);

    // Waiting for results on another thread than the one that submits: activity() is a counter the child
    // bumps per finished frame (wake_waiters() bumps it too), and wait_activity() returns once it differs
    // from `seen`. It spins up to `spin` iterations (adapted to how long recent waits took), then blocks on
    // the futex; with spin 0 it blocks at once and leaves the adaptation alone. submit() of a frame into an
    // empty ring wakes a blocked waiter (unless set_wake_waiter_on_submit(false)), which can then spin while the
    // frame runs. Both read only atomics of the shared header. One thread at a time waits (wait() or
    // wait_activity()): the header has one parent_sleeping flag, which a second waiter would clear under the
    // first when it woke.
    std::uint32_t activity() const noexcept;
    void wait_activity(std::uint32_t seen, std::uint32_t spin = 2000) noexcept;

    // Whether submit() of a frame into an empty ring wakes a blocked wait_activity() (the default). A child whose
    // results come later than any spin lasts (a remote node's, after a network round trip) turns it off: the
    // wake would only cost its waiter a futex wake and a spin, on a CPU the task's path needs.
    void set_wake_waiter_on_submit(bool wake) noexcept { wake_waiter_on_submit_ = wake; }

    // Ends a concurrent wait() of this parent (the child also wakes it with every result).
    void wake_waiters() noexcept;

    // Asks the child loop to exit and wakes it.
    void request_shutdown() noexcept;

    // Dispatch ids still in flight, oldest first, with their task ids (for failing them).
    std::vector<std::pair<std::uint64_t, std::uint64_t>> in_flight_tasks() const;

private:
    MailboxHeader* header() const noexcept { return reinterpret_cast<MailboxHeader*>(region_.data()); }
    TaskFrame* frame(std::uint64_t dispatch_id) const noexcept;
    void wake_child() noexcept;
    // The dispatch id of the first frame poll() would take, if one is finished.
    std::optional<std::uint64_t> finished() const noexcept;

    UniqueFd fd_;
    MappedRegion region_;
    std::uint32_t generation_;
    std::uint64_t next_dispatch_ = 0;
    std::uint64_t next_complete_ = 0;
    FrameTrailer sent_[MAILBOX_FRAMES]{}; // what was dispatched per slot, kept in private memory
    AdaptiveSpin activity_spin_;          // wait_activity's
    bool wake_waiter_on_submit_ = true;
    bool any_order_ = false;
    // In any order: frames after next_complete_ already collected, by slot, and how many.
    bool collected_[MAILBOX_FRAMES]{};
    std::size_t collected_ahead_ = 0;
};

} // namespace canopy::ipc
