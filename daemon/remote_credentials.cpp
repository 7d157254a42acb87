#include "daemon/remote_credentials.h"

#include "daemon/remote_call.h"
#include "daemon/task_batch.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <google/protobuf/stubs/logging.h> // SetLogHandler: protobuf declares it in its base-utilities folder
#include <grpc/grpc_security_constants.h>
#include <grpc/support/log.h>
#include <grpcpp/security/auth_context.h>
#include <limits>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string_view>
#include <sys/stat.h>

namespace canopy::daemon {
namespace {

// A CA bundle of a few dozen certificates fits many times over.
constexpr off_t MAX_PEM_BYTES = 1 << 20;

std::string read_pem(const std::filesystem::path& file, const char* what) {
    struct stat st {};
    if (::stat(file.c_str(), &st) != 0) {
        throw std::runtime_error(std::string("cannot read the ") + what + " " + file.string() + ": " +
                                 std::strerror(errno));
    }
    // A directory would read as empty, a device or a FIFO without end or not at all.
    if (!S_ISREG(st.st_mode)) {
        throw std::runtime_error(std::string("the ") + what + " " + file.string() + " is not a regular file");
    }
    if (st.st_size > MAX_PEM_BYTES) {
        throw std::runtime_error(std::string("the ") + what + " " + file.string() + " is " +
                                 std::to_string(st.st_size) + " bytes, more than a PEM file of " +
                                 std::to_string(MAX_PEM_BYTES) + " holds");
    }
    std::ifstream in(file, std::ios::binary);
    if (!in) {
        throw std::runtime_error(std::string("cannot read the ") + what + " " + file.string() + ": " +
                                 std::strerror(errno));
    }
    std::ostringstream bytes;
    bytes << in.rdbuf();
    if (bytes.str().empty()) {
        throw std::runtime_error(std::string("the ") + what + " " + file.string() + " is empty");
    }
    return bytes.str();
}

std::mutex grpc_log_mu;
std::shared_ptr<spdlog::logger> grpc_log; // guarded by grpc_log_mu
std::string grpc_last_error;              // guarded by grpc_log_mu

// One line of gRPC's or protobuf's log: an error at warning unless it repeats the last error, the rest at debug.
void log_library_line(const char* library, bool error, const std::string& text) {
    std::lock_guard lock(grpc_log_mu);
    if (!grpc_log) {
        return;
    }
    if (error && text != grpc_last_error) {
        grpc_last_error = text;
        grpc_log->warn("{}: {}", library, text);
    } else {
        grpc_log->debug("{}: {}", library, text);
    }
}

void log_from_grpc(gpr_log_func_args* args) {
    if (args == nullptr || args->message == nullptr) {
        return;
    }
    log_library_line("grpc", args->severity == GPR_LOG_SEVERITY_ERROR, args->message);
}

// Protobuf logs a message it refuses to parse (a string field that is not UTF-8, from a peer) on stderr by default,
// outside the daemon's log format and its priorities.
void log_from_protobuf(google::protobuf::LogLevel level, const char*, int, const std::string& message) {
    log_library_line("protobuf", level >= google::protobuf::LOGLEVEL_ERROR, message);
}

} // namespace

void route_grpc_log(std::shared_ptr<spdlog::logger> log) {
    {
        std::lock_guard lock(grpc_log_mu);
        grpc_log = std::move(log);
    }
    gpr_set_log_function(log_from_grpc);
    google::protobuf::SetLogHandler(log_from_protobuf);
}

std::shared_ptr<grpc::ServerCredentials> server_credentials(const config::TlsConfig& tls) {
    if (tls.insecure) {
        return grpc::InsecureServerCredentials();
    }
    grpc::SslServerCredentialsOptions options(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
    options.pem_root_certs = read_pem(tls.ca, "CA certificate");
    options.pem_key_cert_pairs.push_back({read_pem(tls.key, "private key"), read_pem(tls.cert, "certificate")});
    return grpc::SslServerCredentials(options);
}

std::shared_ptr<grpc::ChannelCredentials> channel_credentials(const config::TlsConfig& tls) {
    if (tls.insecure) {
        return grpc::InsecureChannelCredentials();
    }
    grpc::SslCredentialsOptions options;
    options.pem_root_certs = read_pem(tls.ca, "CA certificate");
    options.pem_private_key = read_pem(tls.key, "private key");
    options.pem_cert_chain = read_pem(tls.cert, "certificate");
    return grpc::SslCredentials(options);
}

int keepalive_interval_ms(std::chrono::milliseconds lost_after) noexcept {
    return static_cast<int>(std::max<std::int64_t>(lost_after.count() / 3, 50));
}

int keepalive_timeout_ms(std::chrono::milliseconds lost_after) noexcept {
    return static_cast<int>(std::max<std::int64_t>(lost_after.count() - keepalive_interval_ms(lost_after), 50));
}

grpc::ChannelArguments channel_arguments(const config::RemoteConfig& remote) {
    grpc::ChannelArguments args;
    if (!remote.tls.insecure) {
        args.SetSslTargetNameOverride(remote.tls.peer_name);
    }
    const int third = keepalive_interval_ms(remote.lost_after);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, third);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, keepalive_timeout_ms(remote.lost_after));
    args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
    args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    static_assert(MAX_BATCH_BYTES + (64 << 10) <= MAX_NODE_MESSAGE_BYTES &&
                  MAX_NODE_MESSAGE_BYTES <= static_cast<std::uint64_t>(std::numeric_limits<int>::max()));
    args.SetInt(GRPC_ARG_MAX_RECEIVE_MESSAGE_LENGTH, static_cast<int>(MAX_NODE_MESSAGE_BYTES));
    args.SetInt(GRPC_ARG_HTTP2_MAX_FRAME_SIZE, 4 << 20);
    args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 8 << 20);
    args.SetInt(GRPC_ARG_HTTP2_WRITE_BUFFER_SIZE, 8 << 20);
    // Each link gets its own connection: the L4's links never share one subchannel.
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    return args;
}

std::optional<std::string> peer_name_error(const grpc::AuthContext& auth, const config::TlsConfig& tls) {
    if (tls.insecure) {
        return std::nullopt;
    }
    const auto joined = [&](const char* property) {
        std::string names;
        for (const auto& value : auth.FindPropertyValues(property)) {
            names += (names.empty() ? "" : ", ") + std::string(value.data(), value.size());
        }
        return names;
    };
    // Only a DNS name stands for the peer: gRPC lists a certificate's email, URI and IP names among its subject
    // alternative names too, and a CA that signs an email name for someone does not vouch for a host of that name.
    for (const auto& value : auth.FindPropertyValues(GRPC_PEER_DNS_PROPERTY_NAME)) {
        if (std::string_view(value.data(), value.size()) == tls.peer_name) {
            return std::nullopt;
        }
    }
    const std::string dns = joined(GRPC_PEER_DNS_PROPERTY_NAME);
    const std::string alternative = joined(GRPC_X509_SAN_PROPERTY_NAME);
    if (!dns.empty()) {
        return "the peer's certificate names " + dns + ", expected " + tls.peer_name;
    }
    if (!alternative.empty()) {
        return "the peer's certificate has no DNS name among its subject alternative names (" + alternative +
               "), expected " + tls.peer_name;
    }
    // A certificate without subject alternative names: its common name, as TLS clients check it.
    for (const auto& value : auth.FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
        if (std::string_view(value.data(), value.size()) == tls.peer_name) {
            return std::nullopt;
        }
    }
    const std::string cn = joined(GRPC_X509_CN_PROPERTY_NAME);
    return "the peer's certificate names " + (cn.empty() ? std::string("nothing") : cn) + ", expected " + tls.peer_name;
}

} // namespace canopy::daemon
