#pragma once
// FrameOrder: what a worker remembers of the frames it took, so that a frame ordered after earlier ones
// (TaskFrame::after) runs only when they succeeded.
//
// The parent names in a frame's `after` only tasks whose frames are still in flight in the same mailbox when it
// writes the frame, so each is among the MAILBOX_FRAMES frames taken just before it: a ring of that many
// outcomes is enough. A frame that is handed on (a launch whose completion comes later) is remembered as
// succeeded: what can still fail it later (a CUDA fault) is sticky, and fails every later frame of that worker
// too.
//
// Thread safety: none; the worker's frame loop owns it.

#include "protocol/error.h"
#include "protocol/mailbox.h"

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string>

namespace canopy::worker {

struct FrameRefusal {
    ErrorCode code;
    std::string message;
};

class FrameOrder {
public:
    // Why the frame of task `task_id` must not run, given the tasks it is ordered after: DEPENDENCY_FAILED
    // naming the first that failed, or BAD_REQUEST for a count above MAX_FRAME_AFTER or a task this worker has
    // not taken in its last MAILBOX_FRAMES frames; nullopt when it may run.
    std::optional<FrameRefusal> check(std::span<const std::uint64_t> after, std::uint32_t count) const;

    // Records how the frame of task `task_id` ended (OK for one handed on).
    void record(std::uint64_t task_id, ErrorCode code) noexcept;

private:
    struct Outcome {
        std::uint64_t task_id = 0;
        ErrorCode code = ErrorCode::OK;
        bool used = false;
    };
    const Outcome* find(std::uint64_t task_id) const noexcept;

    std::array<Outcome, MAILBOX_FRAMES> ring_{};
    std::uint32_t next_ = 0;
};

} // namespace canopy::worker
