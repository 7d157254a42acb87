#pragma once
// The child's end of its mailbox (layout: protocol/mailbox.h). It maps the memfd inherited at fork,
// checks the header, takes READY frames in ring order and publishes their results.
//
// Thread safety: the child's frame loop drives next(); finish() may run on another thread for another frame;
// interrupt() on any thread.

#include "ipc/futex.h"
#include "ipc/mapped_region.h"
#include "protocol/error.h"
#include "protocol/mailbox.h"

#include <atomic>
#include <cstdint>
#include <string_view>

namespace canopy::ipc {

class MailboxChild {
public:
    // Maps the mailbox memfd and checks magic, version, size, frame geometry and generation. Throws
    // std::runtime_error naming the mismatch.
    MailboxChild(int memfd, std::uint32_t generation);

    // Spin steps of next() before it blocks: about 100 us with its yields. A client that waits for each
    // task's reply before sending the next keeps the worker idle for one round trip through the daemon
    // (tens of microseconds when a wake-up is involved); a spin that outlasts it keeps the worker's CPU out
    // of its idle state, and waking an idle CPU is what makes such a round trip slow on a virtual machine.
    static constexpr std::uint32_t SPIN = 5000;

    // Blocks until the next frame in ring order is READY (returns it, now RUNNING, with its trailer
    // copied into `trailer`) or shutdown was requested (returns nullptr). Spins at most `spin` steps (fewer
    // while recent spins went unanswered: AdaptiveSpin; yielding every SPIN_YIELD_EVERY steps), then
    // blocks on the futex; never sleeps on a timer.
    TaskFrame* next(FrameTrailer& trailer, std::uint32_t spin = SPIN);

    // Whether the trailer names this child's incarnation and the dispatch it expects.
    bool trailer_expected(const FrameTrailer& trailer) const noexcept;

    // Writes the result (message truncated to the result area), echoes `trailer`, and publishes DONE or
    // FAILED. A frame whose trailer changed while it ran is published FAILED with the trailer it has
    // now, which the parent detects as a mismatch.
    void finish(TaskFrame* frame, const FrameTrailer& trailer, ErrorCode code, std::string_view message,
                std::uint64_t start_ns, std::uint64_t end_ns);

    bool shutdown_requested() const noexcept;

    // Whether the next frame in ring order is READY now (next() would return it without waiting).
    bool next_ready() const noexcept;
    // Makes next() return nullptr from now on, and wakes it if it waits: the child stops taking frames (a cuda
    // chip whose context failed). May be called from any thread of the child.
    void interrupt() noexcept;

private:
    MailboxHeader* header() const noexcept { return reinterpret_cast<MailboxHeader*>(region_.data()); }
    TaskFrame* frame(std::uint64_t dispatch_id) const noexcept;

    MappedRegion region_;
    std::uint32_t generation_;
    std::uint64_t next_dispatch_ = 0;
    AdaptiveSpin spin_;
    std::atomic<bool> interrupted_{false};
};

} // namespace canopy::ipc
