#pragma once
// BufferDescriptor: what a process is told about a buffer. It names the backing by identity and carries
// no address, except the fork-inherited base of FORK_SHM / FORK_COW arenas, which is the same in every
// process of the tree because the arena is mapped before the zygote fork.
//
// Layout (little-endian, 96 bytes):
//   0  magic          BUFFER_DESCRIPTOR_MAGIC
//   4  backend        Backend
//   5  access         Access granted to the holder
//   6  address_space  AddressSpace; must match the backend
//   7  reserved0      zero
//   8  device         device ordinal for DEVICE buffers (< MAX_DEVICE_ORDINAL); zero for HOST buffers
//  12  reserved1      zero
//  16  identity       CanonicalIdentity
//  48  nbytes         size of the backing, > 0
//  56  body_len       bytes of body in use, <= 32
//  60  reserved2      zero
//  64  body[32]       backend-specific; bytes past body_len are zero
// Body schemas:
//   POSIX_SHM           the shm name without the leading '/': 1..31 bytes in 0x21..0x7e (printable
//                       ASCII without space), no '/'
//   FORK_SHM, FORK_COW  the arena base address: exactly 8 bytes, u64 little-endian, non-zero
//   CUDA_VMM, SIM_VMM   empty (body_len 0): a VMM buffer travels as a file descriptor, never an address
// FORK_COW grants READ only.
//
// Thread safety: plain values and pure functions.

#include "protocol/error.h"
#include "protocol/identity.h"
#include "protocol/wire_enum.h"

#include <array>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <type_traits>

namespace canopy {

inline constexpr std::uint32_t BUFFER_DESCRIPTOR_MAGIC = 0x46554243; // "CBUF" in little-endian bytes
inline constexpr std::uint32_t DESCRIPTOR_BODY_CAPACITY = 32;
inline constexpr std::uint32_t MAX_DEVICE_ORDINAL = 1024;
inline constexpr std::uint32_t MAX_SHM_NAME_LENGTH = 31;

struct BufferDescriptor {
    std::uint32_t magic;
    WireEnum<Backend> backend;
    WireEnum<Access> access;
    WireEnum<AddressSpace> address_space;
    std::uint8_t reserved0;
    std::uint32_t device;
    std::uint32_t reserved1;
    CanonicalIdentity identity;
    std::uint64_t nbytes;
    std::uint32_t body_len;
    std::uint32_t reserved2;
    std::array<std::uint8_t, DESCRIPTOR_BODY_CAPACITY> body;
};

static_assert(sizeof(BufferDescriptor) == 96);
static_assert(std::is_trivially_copyable_v<BufferDescriptor>);
static_assert(std::is_standard_layout_v<BufferDescriptor>);
static_assert(offsetof(BufferDescriptor, magic) == 0);
static_assert(offsetof(BufferDescriptor, backend) == 4);
static_assert(offsetof(BufferDescriptor, access) == 5);
static_assert(offsetof(BufferDescriptor, address_space) == 6);
static_assert(offsetof(BufferDescriptor, reserved0) == 7);
static_assert(offsetof(BufferDescriptor, device) == 8);
static_assert(offsetof(BufferDescriptor, reserved1) == 12);
static_assert(offsetof(BufferDescriptor, identity) == 16);
static_assert(offsetof(BufferDescriptor, nbytes) == 48);
static_assert(offsetof(BufferDescriptor, body_len) == 56);
static_assert(offsetof(BufferDescriptor, reserved2) == 60);
static_assert(offsetof(BufferDescriptor, body) == 64);

// The single gate for descriptors. Throws WireError(INVALID_DESCRIPTOR) whose field names the offending
// member ("backend", "body[3]", "identity.generation").
void validate_descriptor(const BufferDescriptor& d);

// Field-wise equality. The body is compared up to body_len clamped to the body array, then the bytes
// past it, so a body_len larger than the array never reads out of bounds and two descriptors that differ
// anywhere never compare equal.
bool operator==(const BufferDescriptor& a, const BufferDescriptor& b) noexcept;

// Constructors that fill every field and validate the result (throw WireError).
BufferDescriptor make_posix_shm_descriptor(const CanonicalIdentity& id, std::uint64_t nbytes, Access access,
                                           std::string_view shm_name);
BufferDescriptor make_vmm_descriptor(Backend backend, const CanonicalIdentity& id, std::uint64_t nbytes, Access access,
                                     std::uint32_t device);
BufferDescriptor make_fork_descriptor(Backend backend, const CanonicalIdentity& id, std::uint64_t nbytes, Access access,
                                      std::uint64_t base);

// The POSIX shm name (without '/') of a descriptor that validated as POSIX_SHM.
std::string_view shm_name(const BufferDescriptor& d) noexcept;
// The arena base of a descriptor that validated as FORK_SHM or FORK_COW.
std::uint64_t fork_base(const BufferDescriptor& d) noexcept;

// Internal form of the gate: every field name is prefixed with `prefix` and errors carry `code`.
// validate_tensor uses it with "buffer." and INVALID_TENSOR.
void validate_descriptor_as(const BufferDescriptor& d, ErrorCode code, std::string_view prefix);

} // namespace canopy
