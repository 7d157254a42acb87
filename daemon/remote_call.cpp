#include "daemon/remote_call.h"

#include "protocol/task_args.h"
#include "remote/canopy_remote.pb.h"

#include <cstring>
#include <span>

namespace canopy::daemon {

TaskRequest decode_task_call(const canopy::remote::v1::TaskCall& call) {
    TaskRequest request;
    const std::string& blob = call.args();
    request.args = decode_task_args(std::as_bytes(std::span(blob.data(), blob.size())));
    if (call.launch().size() != sizeof(LaunchConfig)) {
        throw RequestError(ErrorCode::BAD_REQUEST, "task.launch: expected " + std::to_string(sizeof(LaunchConfig)) +
                                                       " bytes, got " + std::to_string(call.launch().size()));
    }
    std::memcpy(&request.launch, call.launch().data(), sizeof request.launch);
    request.kernel = call.kernel();
    request.worker = call.worker();
    request.timeout = std::chrono::milliseconds(call.timeout_ms());
    return request;
}

} // namespace canopy::daemon
