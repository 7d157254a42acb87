// validate_descriptor: one test per rejection rule, each checking the exact field and code; the make_*
// constructors and accessors; field-wise equality.

#include "tests/protocol/support.h"

#include <initializer_list>
#include <string>

using namespace canopy;
using canopy::test::fork_descriptor;
using canopy::test::shm_descriptor;
using canopy::test::vmm_descriptor;

namespace {

void set_body(BufferDescriptor& d, std::string_view text) {
    d.body = {};
    d.body_len = static_cast<std::uint32_t>(text.size());
    for (std::size_t i = 0; i < text.size(); ++i) {
        d.body[i] = static_cast<std::uint8_t>(text[i]);
    }
}

} // namespace

TEST_CASE("valid descriptors of every backend pass the gate", "[protocol]") {
    CHECK_NOTHROW(validate_descriptor(shm_descriptor()));
    CHECK_NOTHROW(validate_descriptor(shm_descriptor(1, Access::READ)));
    CHECK_NOTHROW(validate_descriptor(vmm_descriptor(1 << 20, 0, Backend::CUDA_VMM)));
    CHECK_NOTHROW(validate_descriptor(vmm_descriptor(1 << 20, MAX_DEVICE_ORDINAL - 1, Backend::SIM_VMM)));
    CHECK_NOTHROW(validate_descriptor(fork_descriptor(Backend::FORK_SHM, Access::READWRITE)));
    CHECK_NOTHROW(validate_descriptor(fork_descriptor(Backend::FORK_COW, Access::READ)));
}

TEST_CASE("a zeroed descriptor is invalid", "[protocol]") {
    REQUIRE_WIRE_ERROR(validate_descriptor(BufferDescriptor{}), ErrorCode::INVALID_DESCRIPTOR, "magic");
}

TEST_CASE("validate_descriptor rejects a bad magic", "[protocol]") {
    BufferDescriptor d = shm_descriptor();
    d.magic = BUFFER_DESCRIPTOR_MAGIC + 1;
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "magic");
}

TEST_CASE("validate_descriptor rejects an unknown backend", "[protocol]") {
    for (const std::uint8_t raw : std::initializer_list<std::uint8_t>{0, 6, 7, 255}) {
        BufferDescriptor d = shm_descriptor();
        d.backend = raw;
        CAPTURE(raw);
        const WireError e = REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "backend");
        CHECK_THAT(e.problem(), Catch::Contains(std::to_string(raw)));
    }
}

TEST_CASE("validate_descriptor rejects an unknown access", "[protocol]") {
    for (const std::uint8_t raw : std::initializer_list<std::uint8_t>{0, 4, 255}) {
        BufferDescriptor d = shm_descriptor();
        d.access = raw;
        CAPTURE(raw);
        REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "access");
    }
}

TEST_CASE("validate_descriptor rejects an unknown address space", "[protocol]") {
    for (const std::uint8_t raw : std::initializer_list<std::uint8_t>{0, 3, 128}) {
        BufferDescriptor d = shm_descriptor();
        d.address_space = raw;
        CAPTURE(raw);
        REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "address_space");
    }
}

TEST_CASE("validate_descriptor rejects a host backend stated in device memory", "[protocol]") {
    BufferDescriptor d = shm_descriptor();
    d.address_space = AddressSpace::DEVICE;
    const WireError e = REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "address_space");
    CHECK(e.problem() == "backend posix_shm lives in host memory, not device");
}

TEST_CASE("validate_descriptor rejects a device backend stated in host memory", "[protocol]") {
    BufferDescriptor d = vmm_descriptor(1 << 20, 0);
    d.address_space = AddressSpace::HOST;
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "address_space");
}

TEST_CASE("validate_descriptor rejects a host buffer with a device ordinal", "[protocol]") {
    BufferDescriptor d = fork_descriptor();
    d.device = 1;
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "device");
}

TEST_CASE("validate_descriptor rejects a device ordinal out of range", "[protocol]") {
    BufferDescriptor d = vmm_descriptor();
    d.device = MAX_DEVICE_ORDINAL;
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "device");
    d.device = UINT32_MAX;
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "device");
    d.device = MAX_DEVICE_ORDINAL - 1;
    CHECK_NOTHROW(validate_descriptor(d));
}

TEST_CASE("validate_descriptor rejects a fork_cow buffer that grants write", "[protocol]") {
    BufferDescriptor d = fork_descriptor(Backend::FORK_COW, Access::READ);
    d.access = Access::WRITE;
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "access");
    REQUIRE_WIRE_ERROR(make_fork_descriptor(Backend::FORK_COW, test::identity(), 64, Access::WRITE, 4096),
                       ErrorCode::INVALID_DESCRIPTOR, "access");
}

TEST_CASE("validate_descriptor rejects a fork_cow buffer that grants readwrite", "[protocol]") {
    BufferDescriptor d = fork_descriptor(Backend::FORK_COW, Access::READ);
    d.access = Access::READWRITE;
    const WireError e = REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "access");
    CHECK_THAT(e.problem(), Catch::Contains("readwrite"));
}

TEST_CASE("validate_descriptor accepts a read-only fork_shm buffer", "[protocol]") {
    const BufferDescriptor d = fork_descriptor(Backend::FORK_SHM, Access::READ);
    CHECK(d.backend == Backend::FORK_SHM);
    CHECK(d.access == Access::READ);
    CHECK_NOTHROW(validate_descriptor(d));
}

TEST_CASE("validate_descriptor rejects non-zero reserved0", "[protocol]") {
    BufferDescriptor d = shm_descriptor();
    d.reserved0 = 1;
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "reserved0");
}

TEST_CASE("validate_descriptor rejects non-zero reserved1", "[protocol]") {
    BufferDescriptor d = shm_descriptor();
    d.reserved1 = 0x80000000U;
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "reserved1");
}

TEST_CASE("validate_descriptor rejects non-zero reserved2", "[protocol]") {
    BufferDescriptor d = vmm_descriptor();
    d.reserved2 = 2;
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "reserved2");
}

TEST_CASE("validate_descriptor rejects a size of zero", "[protocol]") {
    BufferDescriptor d = shm_descriptor();
    d.nbytes = 0;
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "nbytes");
    REQUIRE_WIRE_ERROR(make_vmm_descriptor(Backend::CUDA_VMM, test::identity(), 0, Access::READ, 0),
                       ErrorCode::INVALID_DESCRIPTOR, "nbytes");
}

TEST_CASE("validate_descriptor rejects an empty shm name", "[protocol]") {
    BufferDescriptor d = shm_descriptor();
    set_body(d, "");
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "body_len");
    REQUIRE_WIRE_ERROR(make_posix_shm_descriptor(test::identity(), 64, Access::READ, ""), ErrorCode::INVALID_DESCRIPTOR,
                       "body_len");
}

TEST_CASE("validate_descriptor rejects a 32-byte shm name", "[protocol]") {
    BufferDescriptor d = shm_descriptor();
    set_body(d, std::string(32, 'a'));
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "body_len");
    REQUIRE_WIRE_ERROR(make_posix_shm_descriptor(test::identity(), 64, Access::READ, std::string(32, 'a')),
                       ErrorCode::INVALID_DESCRIPTOR, "body_len");
    REQUIRE_WIRE_ERROR(make_posix_shm_descriptor(test::identity(), 64, Access::READ, std::string(33, 'a')),
                       ErrorCode::INVALID_DESCRIPTOR, "body_len");
}

TEST_CASE("validate_descriptor accepts a 31-byte shm name", "[protocol]") {
    const std::string name(31, 'z');
    const BufferDescriptor d = make_posix_shm_descriptor(test::identity(), 64, Access::READ, name);
    CHECK(shm_name(d) == name);
}

TEST_CASE("validate_descriptor rejects a shm name containing a slash", "[protocol]") {
    BufferDescriptor d = shm_descriptor();
    set_body(d, "abc/def");
    const WireError e = REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "body[3]");
    CHECK_THAT(e.problem(), Catch::Contains("47"));
    REQUIRE_WIRE_ERROR(make_posix_shm_descriptor(test::identity(), 64, Access::READ, "/leading"),
                       ErrorCode::INVALID_DESCRIPTOR, "body[0]");
}

TEST_CASE("validate_descriptor rejects a shm name with a non-printable byte", "[protocol]") {
    for (const std::uint8_t byte : std::initializer_list<std::uint8_t>{0x01, 0x1f, 0x7f, 0x80, 0xff}) {
        BufferDescriptor d = shm_descriptor();
        set_body(d, "name");
        d.body[2] = byte;
        CAPTURE(byte);
        REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "body[2]");
    }
    BufferDescriptor d = shm_descriptor();
    set_body(d, "name");
    d.body[1] = 0; // a NUL inside body_len is not the end of the name
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "body[1]");
}

TEST_CASE("validate_descriptor rejects a fork body that is not 8 bytes", "[protocol]") {
    for (const std::uint32_t len : {0U, 7U, 9U, 32U}) {
        BufferDescriptor d = fork_descriptor();
        d.body_len = len;
        CAPTURE(len);
        REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "body_len");
    }
}

TEST_CASE("validate_descriptor rejects a fork base of zero", "[protocol]") {
    BufferDescriptor d = fork_descriptor();
    for (std::size_t i = 0; i < 8; ++i) {
        d.body[i] = 0;
    }
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "body");
    REQUIRE_WIRE_ERROR(make_fork_descriptor(Backend::FORK_COW, test::identity(), 64, Access::READ, 0),
                       ErrorCode::INVALID_DESCRIPTOR, "body");
}

TEST_CASE("validate_descriptor rejects a vmm descriptor with a body", "[protocol]") {
    for (const Backend backend : {Backend::CUDA_VMM, Backend::SIM_VMM}) {
        BufferDescriptor d = vmm_descriptor(64, 0, backend);
        d.body_len = 1;
        d.body[0] = 'x';
        REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "body_len");
    }
}

TEST_CASE("validate_descriptor rejects a body length past the body array", "[protocol]") {
    for (const std::uint32_t len : {33U, 200U, UINT32_MAX}) {
        BufferDescriptor d = shm_descriptor();
        d.body_len = len;
        CAPTURE(len);
        REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "body_len");
    }
}

TEST_CASE("validate_descriptor rejects a non-zero byte past body_len", "[protocol]") {
    SECTION("posix_shm") {
        BufferDescriptor d = shm_descriptor();
        set_body(d, "abc");
        d.body[5] = 1;
        REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "body[5]");
    }
    SECTION("posix_shm, the byte right after the name") {
        BufferDescriptor d = shm_descriptor();
        set_body(d, "abc");
        d.body[3] = 'd';
        REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "body[3]");
    }
    SECTION("fork") {
        BufferDescriptor d = fork_descriptor();
        d.body[8] = 0xff;
        REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "body[8]");
    }
    SECTION("vmm, the last byte") {
        BufferDescriptor d = vmm_descriptor();
        d.body[31] = 1;
        REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "body[31]");
    }
}

TEST_CASE("validate_descriptor rejects an all-zero owner instance", "[protocol]") {
    BufferDescriptor d = shm_descriptor();
    d.identity.owner_instance = {};
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "identity.owner_instance");
}

TEST_CASE("validate_descriptor rejects identity generation zero", "[protocol]") {
    BufferDescriptor d = shm_descriptor();
    d.identity.generation = 0;
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "identity.generation");
}

TEST_CASE("validate_descriptor rejects non-zero identity reserved bytes", "[protocol]") {
    BufferDescriptor d = vmm_descriptor();
    d.identity.reserved = 1;
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "identity.reserved");
}

TEST_CASE("validate_descriptor_as prefixes fields and carries the given code", "[protocol]") {
    BufferDescriptor d = shm_descriptor();
    d.nbytes = 0;
    REQUIRE_WIRE_ERROR(validate_descriptor_as(d, ErrorCode::BAD_REQUEST, "x."), ErrorCode::BAD_REQUEST, "x.nbytes");
    d = shm_descriptor();
    d.identity.generation = 0;
    REQUIRE_WIRE_ERROR(validate_descriptor_as(d, ErrorCode::INVALID_TENSOR, "buffer."), ErrorCode::INVALID_TENSOR,
                       "buffer.identity.generation");
}

TEST_CASE("make constructors fill every field", "[protocol]") {
    const CanonicalIdentity id = test::identity(9, 123, 4);
    const BufferDescriptor shm = make_posix_shm_descriptor(id, 4096, Access::WRITE, "seg");
    CHECK(shm.magic == BUFFER_DESCRIPTOR_MAGIC);
    CHECK(shm.backend == Backend::POSIX_SHM);
    CHECK(shm.access == Access::WRITE);
    CHECK(shm.address_space == AddressSpace::HOST);
    CHECK(shm.device == 0);
    CHECK(shm.identity == id);
    CHECK(shm.nbytes == 4096);
    CHECK(shm.body_len == 3);
    CHECK(shm_name(shm) == "seg");

    const BufferDescriptor vmm = make_vmm_descriptor(Backend::SIM_VMM, id, 1 << 21, Access::READ, 3);
    CHECK(vmm.address_space == AddressSpace::DEVICE);
    CHECK(vmm.device == 3);
    CHECK(vmm.body_len == 0);
    CHECK(vmm.body == std::array<std::uint8_t, 32>{});

    const BufferDescriptor fork = make_fork_descriptor(Backend::FORK_SHM, id, 8192, Access::READ, 0x7fabcdef0000ULL);
    CHECK(fork.address_space == AddressSpace::HOST);
    CHECK(fork.body_len == 8);
    CHECK(fork_base(fork) == 0x7fabcdef0000ULL);
    const BufferDescriptor high = make_fork_descriptor(Backend::FORK_COW, id, 1, Access::READ, UINT64_MAX);
    CHECK(fork_base(high) == UINT64_MAX);
}

TEST_CASE("shm_name never reads past the body array", "[protocol]") {
    BufferDescriptor d = shm_descriptor();
    d.body_len = 200;
    CHECK(shm_name(d).size() == DESCRIPTOR_BODY_CAPACITY);
}

TEST_CASE("descriptors that differ only in a body byte past a huge body_len compare unequal", "[protocol]") {
    BufferDescriptor a = shm_descriptor();
    a.body_len = 200;
    BufferDescriptor b = a;
    CHECK(a == b);
    for (std::size_t i = 0; i < DESCRIPTOR_BODY_CAPACITY; ++i) {
        b = a;
        b.body[i] ^= 0x40;
        CAPTURE(i);
        CHECK_FALSE(a == b);
        CHECK_FALSE(b == a);
    }
}

TEST_CASE("identical descriptors with a huge body_len compare equal", "[protocol]") {
    BufferDescriptor a = shm_descriptor();
    a.body_len = 200;
    BufferDescriptor b = shm_descriptor();
    b.body_len = 200;
    CHECK(a == b);
    a.body_len = UINT32_MAX;
    b.body_len = UINT32_MAX;
    CHECK(a == b);
}

TEST_CASE("descriptors that differ in any single field compare unequal", "[protocol]") {
    const BufferDescriptor base = shm_descriptor();
    CHECK(base == shm_descriptor());
    // Flipping any single byte of the 96 changes exactly one field (or one body byte).
    for (std::size_t offset = 0; offset < sizeof(BufferDescriptor); ++offset) {
        BufferDescriptor other = base;
        auto* bytes = reinterpret_cast<unsigned char*>(&other);
        bytes[offset] = static_cast<unsigned char>(bytes[offset] ^ 0x01);
        CAPTURE(offset);
        CHECK_FALSE(base == other);
        CHECK_FALSE(other == base);
    }
}

TEST_CASE("descriptors that differ only past body_len compare unequal", "[protocol]") {
    BufferDescriptor a = shm_descriptor();
    BufferDescriptor b = a;
    b.body[20] = 7; // past the 11-byte name
    CHECK_FALSE(a == b);
}

TEST_CASE("the shm name gate checks every byte value at every position of every length", "[protocol]") {
    int mismatches = 0;
    for (std::uint32_t len = 1; len <= MAX_SHM_NAME_LENGTH; ++len) {
        for (std::uint32_t pos = 0; pos < len; ++pos) {
            for (int byte = 0; byte < 256; ++byte) {
                BufferDescriptor d = shm_descriptor();
                set_body(d, std::string(len, 'n'));
                d.body[pos] = static_cast<std::uint8_t>(byte);
                const bool printable = byte >= 0x21 && byte <= 0x7e && byte != '/';
                try {
                    validate_descriptor(d);
                    if (!printable) {
                        ++mismatches;
                        FAIL_CHECK("accepted byte " << byte << " at " << pos << " of a " << len << "-byte name");
                    }
                } catch (const WireError& e) {
                    if (printable || e.field() != "body[" + std::to_string(pos) + "]") {
                        ++mismatches;
                        FAIL_CHECK("byte " << byte << " at " << pos << " of " << len << ": " << e.what());
                    }
                }
                if (mismatches > 10) {
                    FAIL("too many mismatches");
                }
            }
        }
    }
    CHECK(mismatches == 0);
}

TEST_CASE("the first bad byte of a shm name is the one named", "[protocol]") {
    BufferDescriptor d = shm_descriptor();
    set_body(d, "abcdefghijklmnopqrstuvwxyz");
    d.body[20] = '/';
    d.body[9] = 0x7f;
    REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR, "body[9]");
}

TEST_CASE("the body tail gate checks every position past body_len", "[protocol]") {
    struct Case {
        BufferDescriptor d;
        std::uint32_t first_free;
    };
    std::vector<Case> cases;
    cases.push_back({vmm_descriptor(), 0});
    cases.push_back({fork_descriptor(), 8});
    for (std::uint32_t len = 1; len <= MAX_SHM_NAME_LENGTH; ++len) {
        BufferDescriptor d = shm_descriptor();
        set_body(d, std::string(len, 'q'));
        cases.push_back({d, len});
    }
    for (const Case& c : cases) {
        for (std::uint32_t pos = c.first_free; pos < DESCRIPTOR_BODY_CAPACITY; ++pos) {
            for (const std::uint8_t byte : std::initializer_list<std::uint8_t>{0x01, 0x80, 0xff}) {
                BufferDescriptor d = c.d;
                d.body[pos] = byte;
                CAPTURE(c.first_free, pos, byte);
                REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR,
                                   "body[" + std::to_string(pos) + "]");
            }
        }
        BufferDescriptor d = c.d;
        d.body[DESCRIPTOR_BODY_CAPACITY - 1] = 1;
        if (c.first_free < DESCRIPTOR_BODY_CAPACITY - 2) {
            d.body[c.first_free + 1] = 2; // two bad bytes: the first is named
            REQUIRE_WIRE_ERROR(validate_descriptor(d), ErrorCode::INVALID_DESCRIPTOR,
                               "body[" + std::to_string(c.first_free + 1) + "]");
        }
    }
}
