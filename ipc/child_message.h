#pragma once
// Control messages between a parent and one child over their SOCK_SEQPACKET pair; the mailbox carries
// tasks, this socket carries everything that needs a file descriptor or happens outside a task.
//   child -> parent  READY       the child finished its set-up and serves its mailbox; a remote node's link
//                                names its session in text, in decimal
//   child -> parent  FD_REQUEST  the memfd / VMM fd of `descriptor`, by identity
//   parent -> child  FD_REPLY    code OK with the fd attached (one per rank of a symmetric buffer, in
//                                rank order, with the requester's rank), or an error code and text
//   child -> parent  FD_OFFER    the fd of a VMM allocation the child created for `descriptor` (an @vmm_create
//                                frame), with rank = its rank in a symmetric buffer or NOT_SYMMETRIC; the parent
//                                accepts it only for a creation it is waiting for, from the chip it asked
//   child -> parent  FATAL       the child cannot serve (text says why) and exits; it is not restarted
//   parent -> child  WORKER_RESTART  (nested supervisors) restart the worker whose path below the child is `text`
//   child -> parent  STATUS_REPLY    (nested supervisors) a ChildMessage followed by a JSON array of worker
//                                    objects: the nested tree, sent before READY and whenever it changes
// Every message is one ChildMessage; a receiver refuses any other length or an unknown type.

#include "protocol/descriptor.h"

#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace canopy::ipc {

enum class ChildMessageType : std::uint32_t {
    READY = 1,
    FD_REQUEST = 2,
    FD_REPLY = 3,
    FATAL = 4,
    WORKER_RESTART = 5,
    STATUS_REPLY = 6,
    FD_OFFER = 7,
    // The child ends because what it stands for cannot be reached (a remote node's host was lost); text says
    // why. The supervisor restarts it with back-off however often it happens: its budget is not spent.
    LOST = 8,
};

// Largest control message: a STATUS_REPLY's JSON follows its ChildMessage header.
inline constexpr std::size_t MAX_CHILD_MESSAGE_BYTES = 64 * 1024;

struct ChildMessage {
    std::uint32_t type;
    std::int32_t pid;
    std::uint16_t code; // ErrorCode for FD_REPLY
    std::uint16_t text_len;
    std::uint16_t world; // FD_REPLY: number of fds attached (ranks of a symmetric buffer, else 1)
    std::uint16_t rank;  // FD_REPLY of a symmetric buffer: the requester's rank
    BufferDescriptor descriptor;
    char text[256];
};
static_assert(std::is_trivially_copyable_v<ChildMessage>);

// ChildMessage::rank of an FD_REPLY for a buffer that is not symmetric.
inline constexpr std::uint16_t NOT_SYMMETRIC = 0xffff;

} // namespace canopy::ipc
