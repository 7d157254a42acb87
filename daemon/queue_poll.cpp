#include "daemon/queue_poll.h"

#include "ipc/cpus.h"

#include <grpc/support/time.h>

namespace canopy::daemon {

bool next_event(grpc::CompletionQueue& queue, void** tag, bool* ok) {
    if (ipc::spare_cpus()) {
        const auto until = std::chrono::steady_clock::now() + QUEUE_POLL;
        do {
            switch (queue.AsyncNext(tag, ok, gpr_time_0(GPR_CLOCK_MONOTONIC))) {
            case grpc::CompletionQueue::GOT_EVENT:
                return true;
            case grpc::CompletionQueue::SHUTDOWN:
                return false;
            case grpc::CompletionQueue::TIMEOUT:
                break;
            }
        } while (std::chrono::steady_clock::now() < until);
    }
    return queue.Next(tag, ok);
}

} // namespace canopy::daemon
