#pragma once
// Control messages between a parent and one child over their SOCK_SEQPACKET pair; the mailbox carries
// tasks, this socket carries everything that needs a file descriptor or happens outside a task.
//   child -> parent  READY       the child finished its set-up and serves its mailbox
//   child -> parent  FD_REQUEST  the memfd / VMM fd of `descriptor`, by identity
//   parent -> child  FD_REPLY    code OK with the fd attached, or an error code and text
//   child -> parent  FATAL       the child cannot serve (text says why) and exits; it is not restarted
// Every message is one ChildMessage; a receiver refuses any other length or an unknown type.

#include "protocol/descriptor.h"

#include <cstdint>
#include <type_traits>

namespace canopy::ipc {

enum class ChildMessageType : std::uint32_t { READY = 1, FD_REQUEST = 2, FD_REPLY = 3, FATAL = 4 };

struct ChildMessage {
    std::uint32_t type;
    std::int32_t pid;
    std::uint16_t code; // ErrorCode for FD_REPLY
    std::uint16_t text_len;
    std::uint32_t reserved;
    BufferDescriptor descriptor;
    char text[256];
};
static_assert(std::is_trivially_copyable_v<ChildMessage>);

} // namespace canopy::ipc
