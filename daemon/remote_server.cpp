#include "daemon/remote_server_impl.h"
#include "ipc/unique_fd.h"

#include <cerrno>
#include <netdb.h>
#include <sys/socket.h>

namespace canopy::daemon {

void SessionStream::OnCancel() {
    end(grpc::Status::CANCELLED);
}

void SessionStream::OnDone() {
    owner_.forget(id_); // the last call gRPC makes on this stream; the ticker destroys it
}

void RemoteServer::preflight(const config::ServeConfig& serve) {
    (void)server_credentials(serve.tls);
    const std::string address = config::to_string(serve.listen);
    addrinfo hints{};
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
    addrinfo* found = nullptr;
    const std::string port = std::to_string(serve.listen.port);
    if (const int rc = ::getaddrinfo(serve.listen.host.c_str(), port.c_str(), &hints, &found); rc != 0) {
        throw std::runtime_error("cannot serve remote L4s on " + address + ": " + ::gai_strerror(rc));
    }
    std::string error;
    for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
        const ipc::UniqueFd fd(::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol));
        const int one = 1;
        if (!fd || ::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one) != 0 ||
            ::bind(fd.get(), a->ai_addr, a->ai_addrlen) != 0 || ::listen(fd.get(), 1) != 0) {
            error = std::strerror(errno);
            continue;
        }
        error.clear();
        break;
    }
    ::freeaddrinfo(found);
    if (!error.empty()) {
        throw std::runtime_error("cannot serve remote L4s on " + address + ": " + error);
    }
}

RemoteServer::RemoteServer(Supervisor& supervisor, const config::ServeConfig& serve, std::string node_name,
                           std::shared_ptr<spdlog::logger> log)
    : impl_(std::make_unique<Impl>(supervisor, serve, std::move(node_name), std::move(log))) {}

RemoteServer::~RemoteServer() = default;

void RemoteServer::stop() {
    impl_->stop();
}

std::uint16_t RemoteServer::port() const noexcept {
    return impl_->port();
}

std::uint64_t RemoteServer::session() const {
    return impl_->session();
}

} // namespace canopy::daemon
