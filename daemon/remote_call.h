#pragma once
// The node's side of a task call from its L4 (daemon/remote_server.h): the bytes of one TaskCall become a
// TaskRequest here, and nowhere else. The TaskArgs blob goes through decode_task_args (validate_tensor on every
// argument), the launch configuration must be exactly sizeof(LaunchConfig) bytes; the kernel and worker names
// are checked by the Supervisor the request is submitted to.
//
// The same holds for the other bytes that cross the link: a Buffer call becomes a BufferCall here on the node
// (decode_buffer_call), and the descriptor a node answered becomes a BufferDescriptor on the L4
// (remote_buffer_descriptor), each validated.
//
// Thread safety: pure functions.

#include "daemon/request_error.h"
#include "daemon/task.h"
#include "protocol/descriptor.h"

#include <string>
#include <string_view>

namespace canopy::remote::v1 {
class TaskCall;
class BufferCall;
} // namespace canopy::remote::v1

namespace canopy::daemon {

// Throws WireError (the blob: INVALID_TENSOR, INVALID_DESCRIPTOR, ...) or RequestError(BAD_REQUEST) naming the
// field ("task.args: ...", "task.launch: ...").
TaskRequest decode_task_call(const canopy::remote::v1::TaskCall& call);

// A Buffer call as the node acts on it: a creation of `nbytes` with `access`, or the release of `release`.
struct BufferCallRequest {
    bool create = false;
    std::uint64_t nbytes = 0;
    Access access = Access::READWRITE;
    CanonicalIdentity release{};
};

// Throws RequestError(BAD_REQUEST) naming the field: no operation, an access outside 1..3, a release that is not
// 32 bytes.
BufferCallRequest decode_buffer_call(const canopy::remote::v1::BufferCall& call);

// The bytes of a descriptor as lowercase hex, two characters a byte.
std::string remote_buffer_hex(std::string_view descriptor_bytes);
// The descriptor a remote creation answered. Throws RequestError(INVALID_DESCRIPTOR) naming `host` when `hex` is
// not the hex of 96 bytes or validate_descriptor refuses them.
BufferDescriptor remote_buffer_descriptor(std::string_view hex, const std::string& host);

} // namespace canopy::daemon
