#pragma once
// The L4's side of a remote node: the child process that stands for node `path` of another host. It attaches a
// session with the canopyd that serves the node there (daemon/remote_server.h), watches its health, and pushes
// the node's worker tree up as its status, its paths under `path` ("/hb/chip0"). Its READY names the session, on
// which the supervisor sends the node's tasks from its own process (daemon/remote_tasks.h). The link serves the
// mailbox its supervisor gives it like any child (worker::serve_frames) for the rest: buffers, modules and copies
// across hosts.
//
// The link is the process: it connects and attaches before READY, and when the host is lost (it refuses the
// session, stops sending heartbeats for lost_after, or a call fails) the process reports LOST with the reason
// and exits, so that its supervisor fails the tasks in flight WORKER_DIED naming the host and starts the link
// again with back-off. A host that comes back is attached as a new session.
//
// Buffers of the host are made and released through the link too: its supervisor sends the control frames
// REMOTE_BUFFER_CREATE (int64 scalars: bytes, access and, for a symmetric buffer, 1; the frame's target names the
// chip for device memory, or the world's chips joined by commas) and
// REMOTE_BUFFER_RELEASE (one tensor over the buffer),
// which the link turns into Buffer calls of its session. A creation's frame completes with the node's descriptor
// as hex in its message; the supervisor reads it back with remote_buffer_descriptor (daemon/remote_call.h).
//
// Thread safety: run_remote_link owns the process it runs in.

#include "config/config.h"
#include "ipc/unique_fd.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace canopy::daemon {

inline constexpr std::string_view REMOTE_BUFFER_CREATE = "@remote_buffer_create";
inline constexpr std::string_view REMOTE_BUFFER_RELEASE = "@remote_buffer_release";

// How messages name the host of remote node `path`: "host hb at 10.0.0.2:7471".
std::string remote_host_name(const std::string& path, const config::RemoteConfig& remote);

// The exit status of a link whose host was lost.
inline constexpr int LINK_LOST_EXIT_CODE = 75;

// Serves the mailbox until the parent asks it to stop (exit 0), or exits LINK_LOST_EXIT_CODE when the host is
// lost.
// `l4_name` is the L4's node name, which the node logs.
int run_remote_link(const std::string& l4_name, const std::string& path, const config::RemoteConfig& remote,
                    std::uint32_t generation, ipc::UniqueFd mailbox, ipc::UniqueFd control);

} // namespace canopy::daemon
