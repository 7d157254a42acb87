#pragma once
// Messages with attached file descriptors over a SOCK_SEQPACKET Unix socket (SCM_RIGHTS). One send is
// one message; a receiver sees message boundaries. On a stream socket the fds travel with the first byte sent,
// and the receive that reads that byte gets them.
//
// Thread safety: one sender and one receiver per socket at a time.

#include "ipc/unique_fd.h"

#include <cstddef>
#include <span>
#include <stdexcept>
#include <sys/types.h>
#include <utility>
#include <vector>

namespace canopy::ipc {

inline constexpr std::size_t MAX_FDS_PER_MESSAGE = 8;

// A connected SOCK_SEQPACKET pair, both ends O_CLOEXEC. Throws SysError.
std::pair<UniqueFd, UniqueFd> seqpacket_pair();

// Sends one message with `fds` attached (the caller keeps its own copies). Throws SysError (EPIPE when
// the peer is gone; SIGPIPE is never raised).
void send_message(int sock, std::span<const std::byte> bytes, std::span<const int> fds = {});

// One non-blocking send of as much of `bytes` as the socket takes now, `fds` attached to the first byte: the
// bytes sent, or -1 with errno (EAGAIN when nothing fits now; no fd went then). For stream sockets. Never raises
// SIGPIPE.
ssize_t send_some(int sock, std::span<const std::byte> bytes, std::span<const int> fds) noexcept;

// The message arrived whole but some of its file descriptors did not (the receiving process is out of fds,
// EMFILE): the kernel closed the ones that did not fit, and recv_message closes the ones that did. `bytes` is
// the message length, so that a receiver can still act on what the message said.
class FdsTruncated : public std::runtime_error {
public:
    explicit FdsTruncated(std::size_t length)
        : std::runtime_error("recv_message: file descriptors attached to the message were lost (out of file "
                             "descriptors?)"),
          bytes(length) {}
    std::size_t bytes;
};

// Receives one message into `buf`; received fds (O_CLOEXEC) are appended to `fds`. Returns the message
// length, 0 when the peer closed. Throws SysError; FdsTruncated when the message arrived whole but its fds
// did not; std::runtime_error when the message itself was truncated. The fds that did arrive are closed.
std::size_t recv_message(int sock, std::span<std::byte> buf, std::vector<UniqueFd>& fds);

// Typed helpers for trivially copyable message structs.
template <class T>
void send_struct(int sock, const T& message, std::span<const int> fds = {}) {
    send_message(sock, std::as_bytes(std::span<const T, 1>(&message, 1)), fds);
}

} // namespace canopy::ipc
