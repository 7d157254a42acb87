#include "daemon/child_slot.h"

namespace canopy::daemon {

const char* to_string(WorkerState state) noexcept {
    switch (state) {
    case WorkerState::STARTING:
        return "starting";
    case WorkerState::RUNNING:
        return "running";
    case WorkerState::RESTARTING:
        return "restarting";
    case WorkerState::DEAD:
        return "dead";
    case WorkerState::STOPPED:
        return "stopped";
    }
    return "unknown";
}

} // namespace canopy::daemon
