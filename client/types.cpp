#include "client/types.h"

namespace canopy::client {

const char* to_string(TaskStatus status) noexcept {
    switch (status) {
    case TaskStatus::QUEUED:
        return "queued";
    case TaskStatus::RUNNING:
        return "running";
    case TaskStatus::COMPLETED:
        return "completed";
    case TaskStatus::FAILED:
        return "failed";
    case TaskStatus::REJECTED:
        return "rejected";
    }
    return "?";
}

TaskError::TaskError(TaskState task)
    : Error(task.error_code.value_or(ErrorCode::OK), task.error_code_name,
            "task " + task.name + " (id " + std::to_string(task.id) + ") " + to_string(task.status) + ": " +
                task.error_message),
      task_(std::move(task)) {}

bool Status::all_running() const noexcept {
    const auto listed = json.find("workers");
    if (listed == json.end() || !listed->is_array()) {
        return true;
    }
    for (const auto& w : *listed) {
        const auto state = w.is_object() ? w.find("state") : w.end();
        if (!w.is_object() || state == w.end() || *state != "running") {
            return false;
        }
    }
    return true;
}

} // namespace canopy::client
