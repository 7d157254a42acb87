#pragma once
// RemoteServer: a level-3 canopyd serving one level-4 canopyd of another host over gRPC (the `serve` section,
// docs/multihost.md). The L4 opens a session with Attach; the node answers with Hello (its name and buffer
// owner nonce), then streams its worker tree whenever it changes and a heartbeat every heartbeat_ms. Tasks
// arrive on the session's Tasks stream, each a TaskCall carrying the TaskArgs blob, which is decoded here with
// decode_task_call (validate_tensor on every argument) before the task reaches this node's Supervisor; its
// TaskReply, written when it finished, carries the call's id and the task's own error code, message and times.
// Echo answers a TaskCall at once without running anything (health checks, benchmarks).
//
// One L4 at a time: a new Attach ends the earlier session (its stream finishes ABORTED, and its task stream
// does at its next call), so an L4 that reconnects after a partition is served at once. An L4 that disappears
// (silent for lost_after: keepalive_timeout_ms) ends its session; the node keeps running and waits for the next.
// With TLS every call's peer certificate must name serve.tls.peer_name.
//
// Thread safety: the constructor starts serving; stop(), close() and the destructor from any one thread.

#include "config/config.h"
#include "daemon/supervisor.h"

#include <cstdint>
#include <memory>
#include <spdlog/logger.h>
#include <string>

namespace canopy::daemon {

// The version of canopy_remote.proto's messages both ends speak; an Attach with another is refused.
inline constexpr std::uint32_t REMOTE_PROTOCOL = 2;

class RemoteServer {
public:
    // Listens on serve.listen (port 0: a free port, see port()). Throws std::runtime_error naming the address
    // when it cannot listen, or the file when a PEM file cannot be read.
    RemoteServer(Supervisor& supervisor, const config::ServeConfig& serve, std::string node_name,
                 std::shared_ptr<spdlog::logger> log);
    ~RemoteServer();
    RemoteServer(const RemoteServer&) = delete;
    RemoteServer& operator=(const RemoteServer&) = delete;

    // Checks, before anything starts, that `serve` can work: its PEM files are read and its address is bound once
    // (and let go). Throws std::runtime_error naming the file or the address with the system's reason ("Address
    // already in use", "Cannot assign requested address").
    static void preflight(const config::ServeConfig& serve);

    // Ends the session and stops listening; calls in progress are cancelled, and work that comes back to one
    // (from the Supervisor or the server's worker thread) still answers it. Idempotent.
    void stop();
    // stop(), then ends the server's threads. Call it once the Supervisor has stopped, so that no work comes back
    // to a call afterwards; the destructor calls it. Idempotent.
    void close();

    std::uint16_t port() const noexcept;
    // The current session's id, 0 when no L4 is attached.
    std::uint64_t session() const;

    class Impl;

private:
    std::unique_ptr<Impl> impl_;
};

} // namespace canopy::daemon
