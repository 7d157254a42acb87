#pragma once
// RemoteTasks: the L4's own Tasks stream on a remote node's session. The link child (daemon/remote_link.h)
// attaches the session, watches its health, and makes the host's buffers, modules and copies across hosts; the
// session's tasks go out from the L4's process itself, on a channel of its own to the same host, and their replies
// complete them there. A task then crosses no process between the L4's supervisor and gRPC, which on a machine of
// few CPUs saves a thread's wake-up each way (docs/performance.md, "The L4's own task stream").
//
// send() queues a call (SessionStreams batches them); each message of replies goes to `on_replies`, and the
// stream's end, unless the destructor ended it, to `on_end` once, as the reason the host is lost ("its task
// stream ended (UNAVAILABLE: ...)"); both on the stream's own thread. The destructor cancels the stream and waits
// for its end.
//
// Thread safety: send() from any thread; the callbacks run on the stream's thread, one at a time, and may call
// send().

#include "config/config.h"
#include "daemon/request_error.h"
#include "daemon/task.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace canopy::daemon {

// One task's reply, as the node sent it: the code is checked (an unknown one reads as KERNEL_FAILED, naming the
// host), the rest is the node's.
struct RemoteReply {
    std::uint64_t call_id = 0;
    ErrorCode code = ErrorCode::OK;
    std::string message;
    std::uint64_t start_ns = 0;
    std::uint64_t end_ns = 0;
};

// What a task call carries, taken from the task as the supervisor queued it.
struct RemoteCall {
    std::uint64_t call_id = 0;
    std::uint64_t task_id = 0;
    const std::string& kernel;
    const std::string& worker; // below the node: "sub0"
    const std::vector<std::byte>& args;
    const LaunchConfig& launch;
    std::uint32_t timeout_ms = 0;
};

class RemoteTasks {
public:
    using OnReplies = std::function<void(std::vector<RemoteReply>&)>;
    using OnEnd = std::function<void(const std::string& why)>;

    // Opens a Tasks stream for `session` to `remote`'s host, which `host` names in messages ("host hb at
    // 10.0.0.2:7471"). Throws std::runtime_error when the channel's credentials cannot be made (a PEM file that
    // cannot be read).
    RemoteTasks(const config::RemoteConfig& remote, std::string host, std::uint64_t session, OnReplies on_replies,
                OnEnd on_end);
    ~RemoteTasks();
    RemoteTasks(const RemoteTasks&) = delete;
    RemoteTasks& operator=(const RemoteTasks&) = delete;

    void send(const RemoteCall& call);

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

} // namespace canopy::daemon
