#pragma once
// The TLS side of the link between a level-4 canopyd and a level-3 canopyd on another host: gRPC credentials
// built from a config::TlsConfig, and the check that the peer's certificate carries the configured name.
//
// Mutual TLS: each end presents its certificate (cert, key) and accepts only a peer certificate signed by
// `ca`. The client checks the server's certificate against peer_name (host name verification on the name,
// whatever address it dialled); the server checks the client's against its own peer_name on every call
// (peer_name_error). "tls": "insecure" gives plain TCP, which the config allows only on loopback or under
// testing.insecure_peers.
//
// Thread safety: pure functions; the PEM files are read when the credentials are built.

#include "config/config.h"

#include <chrono>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/support/channel_arguments.h>
#include <memory>
#include <optional>
#include <spdlog/logger.h>
#include <string>

namespace grpc {
class AuthContext;
}

namespace canopy::daemon {

// Throws std::runtime_error naming the file and the system's reason when a PEM file cannot be read.
std::shared_ptr<grpc::ServerCredentials> server_credentials(const config::TlsConfig& tls);
std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const config::TlsConfig& tls);

// Each end pings the other once it has heard nothing from it for keepalive_interval_ms (lost_after / 3, at least
// 50 ms), and gives the ping keepalive_timeout_ms (the rest of lost_after, at least 50 ms) to be answered, so that a
// peer is lost once silent for lost_after, the time the config allows it, and not before. gRPC also sets the
// socket's TCP_USER_TIMEOUT to the ping's timeout: data the peer leaves unacknowledged, or a window it leaves
// closed, for that long ends the connection.
int keepalive_interval_ms(std::chrono::milliseconds lost_after) noexcept;
int keepalive_timeout_ms(std::chrono::milliseconds lost_after) noexcept;

// Channel arguments of the L4's link to `remote`: the name the server's certificate must carry, keepalive pings
// (a peer silent for lost_after fails the channel), reconnect back-off, and no message
// from the node larger than MAX_NODE_MESSAGE_BYTES (daemon/remote_call.h).
grpc::ChannelArguments channel_arguments(const config::RemoteConfig& remote);

// gRPC's and protobuf's own log lines (handshake failures, messages refused for a string that is not UTF-8) go to
// `log`, as "grpc: ..." and "protobuf: ...": errors at warning the first time a text is seen and at debug when it
// repeats the one before, the rest at debug. With a null `log` they are dropped (a link child, whose failures
// reach its supervisor's log as the reason it was lost). Call before gRPC starts.
void route_grpc_log(std::shared_ptr<spdlog::logger> log);

// Why the calling peer is refused, or nullopt: with TLS the peer's certificate must name `tls.peer_name` (a DNS
// subject alternative name, or the common name when the certificate has none).
std::optional<std::string> peer_name_error(const grpc::AuthContext& auth, const config::TlsConfig& tls);

} // namespace canopy::daemon
