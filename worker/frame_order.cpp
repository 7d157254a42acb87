#include "worker/frame_order.h"

namespace canopy::worker {

std::optional<FrameRefusal> FrameOrder::check(std::span<const std::uint64_t> after, std::uint32_t count) const {
    if (count > after.size()) {
        return FrameRefusal{ErrorCode::BAD_REQUEST, "frame is ordered after " + std::to_string(count) +
                                                        " tasks; a frame names at most " +
                                                        std::to_string(after.size())};
    }
    for (std::uint32_t i = 0; i < count; ++i) {
        const Outcome* earlier = find(after[i]);
        if (earlier == nullptr) {
            return FrameRefusal{ErrorCode::BAD_REQUEST, "frame is ordered after task " + std::to_string(after[i]) +
                                                            ", which this worker has not taken"};
        }
        if (earlier->code != ErrorCode::OK) {
            return FrameRefusal{ErrorCode::DEPENDENCY_FAILED,
                                "dependency (task " + std::to_string(after[i]) +
                                    ", on the same worker) failed: " + std::string(error_code_name(earlier->code))};
        }
    }
    return std::nullopt;
}

void FrameOrder::record(std::uint64_t task_id, ErrorCode code) noexcept {
    ring_[next_] = Outcome{task_id, code, true};
    next_ = (next_ + 1) % MAILBOX_FRAMES;
}

const FrameOrder::Outcome* FrameOrder::find(std::uint64_t task_id) const noexcept {
    for (const Outcome& o : ring_) {
        if (o.used && o.task_id == task_id) {
            return &o;
        }
    }
    return nullptr;
}

} // namespace canopy::worker
