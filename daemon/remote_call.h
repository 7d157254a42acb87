#pragma once
// The node's side of a task call from its L4 (daemon/remote_server.h): the bytes of one TaskCall become a
// TaskRequest here, and nowhere else. The TaskArgs blob goes through decode_task_args (validate_tensor on every
// argument), the launch configuration must be exactly sizeof(LaunchConfig) bytes; the kernel and worker names
// are checked by the Supervisor the request is submitted to.
//
// Thread safety: a pure function.

#include "daemon/request_error.h"
#include "daemon/task.h"

namespace canopy::remote::v1 {
class TaskCall;
}

namespace canopy::daemon {

// Throws WireError (the blob: INVALID_TENSOR, INVALID_DESCRIPTOR, ...) or RequestError(BAD_REQUEST) naming the
// field ("task.args: ...", "task.launch: ...").
TaskRequest decode_task_call(const canopy::remote::v1::TaskCall& call);

} // namespace canopy::daemon
