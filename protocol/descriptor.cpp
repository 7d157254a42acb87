#include "protocol/descriptor.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <string>

namespace canopy {
namespace {

struct Gate {
    ErrorCode code;
    std::string_view prefix;

    [[noreturn]] void fail(std::string_view field, const std::string& problem) const {
        throw WireError(code, std::string(prefix) + std::string(field), problem);
    }
};

void check_enums(const BufferDescriptor& d, const Gate& g) {
    if (d.magic != BUFFER_DESCRIPTOR_MAGIC) {
        g.fail("magic", "bad magic " + std::to_string(d.magic));
    }
    if (!is_valid(Backend{d.backend})) {
        g.fail("backend", "unknown backend " + std::to_string(d.backend.raw()));
    }
    if (!is_valid(Access{d.access})) {
        g.fail("access", "unknown access " + std::to_string(d.access.raw()));
    }
    if (!is_valid(AddressSpace{d.address_space})) {
        g.fail("address_space", "unknown address space " + std::to_string(d.address_space.raw()));
    }
}

void check_placement(const BufferDescriptor& d, const Gate& g) {
    const Backend backend = d.backend;
    if (AddressSpace{d.address_space} != address_space_of(backend)) {
        g.fail("address_space", std::string("backend ") + to_string(backend) + " lives in " +
                                    to_string(address_space_of(backend)) + " memory, not " +
                                    to_string(AddressSpace{d.address_space}));
    }
    if (AddressSpace{d.address_space} == AddressSpace::HOST && d.device != 0) {
        g.fail("device", "a host buffer must have device 0, got " + std::to_string(d.device));
    }
    if (d.device >= MAX_DEVICE_ORDINAL) {
        g.fail("device", "device ordinal " + std::to_string(d.device) + " is out of range");
    }
    if (backend == Backend::FORK_COW && Access{d.access} != Access::READ) {
        g.fail("access", std::string("a fork_cow buffer grants read only, not ") + to_string(Access{d.access}));
    }
    if (d.reserved0 != 0 || d.reserved1 != 0 || d.reserved2 != 0) {
        g.fail(d.reserved0 != 0 ? "reserved0" : (d.reserved1 != 0 ? "reserved1" : "reserved2"),
               "reserved bytes must be zero");
    }
    if (d.nbytes == 0) {
        g.fail("nbytes", "buffer size must be > 0");
    }
}

// The body is read as BODY_WORDS u64 words: byte k of word w is body byte 8w + k on a little-endian host.
static_assert(std::endian::native == std::endian::little, "the wire ABI is little-endian");
constexpr std::uint64_t BYTE_ONES = 0x0101010101010101ULL;
constexpr std::uint64_t BYTE_HIGHS = 0x8080808080808080ULL;
constexpr std::size_t BODY_WORDS = DESCRIPTOR_BODY_CAPACITY / 8;

// Non-zero iff some byte of x is below n (n <= 128) / above n (n <= 127) / zero.
constexpr std::uint64_t any_byte_below(std::uint64_t x, std::uint64_t n) noexcept {
    return (x - BYTE_ONES * n) & ~x & BYTE_HIGHS;
}
constexpr std::uint64_t any_byte_above(std::uint64_t x, std::uint64_t n) noexcept {
    return ((x + BYTE_ONES * (127 - n)) | x) & BYTE_HIGHS;
}
constexpr std::uint64_t any_byte_zero(std::uint64_t x) noexcept {
    return any_byte_below(x, 1);
}

// Mask of the bytes of body word `w` that lie before body byte `len` (len <= DESCRIPTOR_BODY_CAPACITY).
constexpr std::uint64_t bytes_before(std::uint32_t len, std::size_t w) noexcept {
    const std::size_t start = 8 * w;
    if (len <= start) {
        return 0;
    }
    return len >= start + 8 ? ~0ULL : ~(~0ULL << (8 * (len - start)));
}

std::array<std::uint64_t, BODY_WORDS> body_words(const BufferDescriptor& d) noexcept {
    std::array<std::uint64_t, BODY_WORDS> words;
    std::memcpy(words.data(), d.body.data(), sizeof words);
    return words;
}

// True when body bytes [0, body_len) are all printable ASCII other than '/'; body_len <= 31. A word at a
// time; the byte loop of check_shm_name finds the culprit when this says no.
bool shm_name_is_clean(const BufferDescriptor& d) noexcept {
    const auto words = body_words(d);
    std::uint64_t bad = 0;
    for (std::size_t w = 0; w < BODY_WORDS; ++w) {
        const std::uint64_t keep = bytes_before(d.body_len, w);
        const std::uint64_t x = (words[w] & keep) | ((BYTE_ONES * 'a') & ~keep);
        bad |= any_byte_below(x, 0x21) | any_byte_above(x, 0x7e) | any_byte_zero(x ^ (BYTE_ONES * '/'));
    }
    return bad == 0;
}

// True when body bytes [body_len, DESCRIPTOR_BODY_CAPACITY) are all zero; body_len <= 32.
bool body_tail_is_zero(const BufferDescriptor& d) noexcept {
    const auto words = body_words(d);
    std::uint64_t any = 0;
    for (std::size_t w = 0; w < BODY_WORDS; ++w) {
        any |= words[w] & ~bytes_before(d.body_len, w);
    }
    return any == 0;
}

void check_shm_name(const BufferDescriptor& d, const Gate& g) {
    if (d.body_len < 1 || d.body_len > MAX_SHM_NAME_LENGTH) {
        g.fail("body_len", "a posix_shm name is 1.." + std::to_string(MAX_SHM_NAME_LENGTH) + " bytes, got " +
                               std::to_string(d.body_len));
    }
    if (shm_name_is_clean(d)) {
        return;
    }
    for (std::uint32_t i = 0; i < d.body_len; ++i) {
        const auto c = d.body[i];
        if (c < 0x21 || c > 0x7e || c == '/') {
            g.fail("body[" + std::to_string(i) + "]",
                   "a posix_shm name is printable ASCII without '/', got byte " + std::to_string(c));
        }
    }
}

void check_body(const BufferDescriptor& d, const Gate& g) {
    if (d.body_len > DESCRIPTOR_BODY_CAPACITY) {
        g.fail("body_len",
               "body length " + std::to_string(d.body_len) + " exceeds " + std::to_string(DESCRIPTOR_BODY_CAPACITY));
    }
    switch (Backend{d.backend}) {
    case Backend::POSIX_SHM:
        check_shm_name(d, g);
        break;
    case Backend::FORK_SHM:
    case Backend::FORK_COW:
        if (d.body_len != 8) {
            g.fail("body_len",
                   "a fork arena body is its 8-byte base address, got " + std::to_string(d.body_len) + " bytes");
        }
        if (fork_base(d) == 0) {
            g.fail("body", "fork arena base address must be non-zero");
        }
        break;
    case Backend::CUDA_VMM:
    case Backend::SIM_VMM:
        if (d.body_len != 0) {
            g.fail("body_len", "a vmm descriptor carries no body, got " + std::to_string(d.body_len) + " bytes");
        }
        break;
    }
    if (body_tail_is_zero(d)) {
        return;
    }
    for (std::uint32_t i = d.body_len; i < DESCRIPTOR_BODY_CAPACITY; ++i) {
        if (d.body[i] != 0) {
            g.fail("body[" + std::to_string(i) + "]", "bytes past body_len must be zero");
        }
    }
}

BufferDescriptor base_descriptor(Backend backend, const CanonicalIdentity& id, std::uint64_t nbytes, Access access) {
    BufferDescriptor d{};
    d.magic = BUFFER_DESCRIPTOR_MAGIC;
    d.backend = backend;
    d.access = access;
    d.address_space = address_space_of(backend);
    d.identity = id;
    d.nbytes = nbytes;
    return d;
}

} // namespace

void validate_descriptor_as(const BufferDescriptor& d, ErrorCode code, std::string_view prefix) {
    const Gate g{code, prefix};
    check_enums(d, g);
    check_placement(d, g);
    validate_identity_as(d.identity, code, prefix);
    check_body(d, g);
}

void validate_descriptor(const BufferDescriptor& d) {
    validate_descriptor_as(d, ErrorCode::INVALID_DESCRIPTOR, {});
}

bool operator==(const BufferDescriptor& a, const BufferDescriptor& b) noexcept {
    if (a.magic != b.magic || a.backend != b.backend || a.access != b.access || a.address_space != b.address_space ||
        a.reserved0 != b.reserved0 || a.device != b.device || a.reserved1 != b.reserved1 ||
        !(a.identity == b.identity) || a.nbytes != b.nbytes || a.body_len != b.body_len || a.reserved2 != b.reserved2) {
        return false;
    }
    const std::size_t used = std::min<std::size_t>(a.body_len, DESCRIPTOR_BODY_CAPACITY);
    return std::equal(a.body.begin(), a.body.begin() + static_cast<std::ptrdiff_t>(used), b.body.begin()) &&
           std::equal(a.body.begin() + static_cast<std::ptrdiff_t>(used), a.body.end(),
                      b.body.begin() + static_cast<std::ptrdiff_t>(used));
}

BufferDescriptor make_posix_shm_descriptor(const CanonicalIdentity& id, std::uint64_t nbytes, Access access,
                                           std::string_view name) {
    BufferDescriptor d = base_descriptor(Backend::POSIX_SHM, id, nbytes, access);
    if (name.size() > DESCRIPTOR_BODY_CAPACITY) {
        throw WireError(ErrorCode::INVALID_DESCRIPTOR, "body_len",
                        "shm name of " + std::to_string(name.size()) + " bytes is too long");
    }
    d.body_len = static_cast<std::uint32_t>(name.size());
    std::memcpy(d.body.data(), name.data(), name.size());
    validate_descriptor(d);
    return d;
}

BufferDescriptor make_vmm_descriptor(Backend backend, const CanonicalIdentity& id, std::uint64_t nbytes, Access access,
                                     std::uint32_t device) {
    BufferDescriptor d = base_descriptor(backend, id, nbytes, access);
    d.device = device;
    validate_descriptor(d);
    return d;
}

BufferDescriptor make_fork_descriptor(Backend backend, const CanonicalIdentity& id, std::uint64_t nbytes, Access access,
                                      std::uint64_t base) {
    BufferDescriptor d = base_descriptor(backend, id, nbytes, access);
    d.body_len = 8;
    for (int i = 0; i < 8; ++i) {
        d.body[static_cast<std::size_t>(i)] = static_cast<std::uint8_t>(base >> (8 * i));
    }
    validate_descriptor(d);
    return d;
}

std::string_view shm_name(const BufferDescriptor& d) noexcept {
    const std::size_t used = std::min<std::size_t>(d.body_len, DESCRIPTOR_BODY_CAPACITY);
    return {reinterpret_cast<const char*>(d.body.data()), used};
}

std::uint64_t fork_base(const BufferDescriptor& d) noexcept {
    std::uint64_t base = 0;
    for (int i = 7; i >= 0; --i) {
        base = (base << 8) | d.body[static_cast<std::size_t>(i)];
    }
    return base;
}

} // namespace canopy
