#include "ipc/fd_passing.h"

#include "ipc/sys_error.h"

#include <cerrno>
#include <cstring>
#include <stdexcept>
#include <sys/socket.h>

namespace canopy::ipc {

std::pair<UniqueFd, UniqueFd> seqpacket_pair() {
    int sv[2];
    sys_check(::socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), "socketpair");
    return {UniqueFd(sv[0]), UniqueFd(sv[1])};
}

namespace {

// sendmsg of `bytes` with `fds` attached to their first byte.
ssize_t send_with_fds(int sock, std::span<const std::byte> bytes, std::span<const int> fds, int flags) {
    iovec iov{const_cast<std::byte*>(bytes.data()), bytes.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * MAX_FDS_PER_MESSAGE)];
    if (!fds.empty()) {
        std::memset(control, 0, sizeof control);
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
        std::memcpy(CMSG_DATA(c), fds.data(), sizeof(int) * fds.size());
    }
    return ::sendmsg(sock, &msg, flags | MSG_NOSIGNAL);
}

} // namespace

void send_message(int sock, std::span<const std::byte> bytes, std::span<const int> fds) {
    if (fds.size() > MAX_FDS_PER_MESSAGE) {
        throw std::invalid_argument("send_message: too many fds");
    }
    sys_retry("sendmsg", [&] { return send_with_fds(sock, bytes, fds, 0); });
}

ssize_t send_some(int sock, std::span<const std::byte> bytes, std::span<const int> fds) noexcept {
    if (fds.size() > MAX_FDS_PER_MESSAGE) {
        errno = EINVAL;
        return -1;
    }
    ssize_t n;
    do {
        n = send_with_fds(sock, bytes, fds, MSG_DONTWAIT);
    } while (n < 0 && errno == EINTR);
    return n;
}

std::size_t recv_message(int sock, std::span<std::byte> buf, std::vector<UniqueFd>& fds) {
    iovec iov{buf.data(), buf.size()};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * MAX_FDS_PER_MESSAGE)];
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    const ssize_t n = sys_retry("recvmsg", [&] { return ::recvmsg(sock, &msg, MSG_CMSG_CLOEXEC); });
    const std::size_t first_new = fds.size();
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
            const std::size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
            for (std::size_t i = 0; i < count; ++i) {
                int fd;
                std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
                fds.emplace_back(fd);
            }
        }
    }
    if ((msg.msg_flags & MSG_TRUNC) != 0) {
        fds.resize(first_new);
        throw std::runtime_error("recv_message: message truncated");
    }
    if ((msg.msg_flags & MSG_CTRUNC) != 0) {
        fds.resize(first_new);
        throw FdsTruncated(static_cast<std::size_t>(n));
    }
    return static_cast<std::size_t>(n);
}

} // namespace canopy::ipc
