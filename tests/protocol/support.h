#pragma once
// Helpers shared by the protocol tests: valid example values and a check for a WireError's exact field,
// code and message. Header-only; test code only.

#include "protocol/protocol.h"
#include "tests/protocol/reference.h"

#include <array>
#include <catch2/catch.hpp>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::test {

// A valid identity whose owner bytes depend on `seed`.
inline CanonicalIdentity identity(std::uint8_t seed = 1, std::uint64_t buffer_id = 7, std::uint32_t generation = 1) {
    CanonicalIdentity id{};
    for (std::size_t i = 0; i < id.owner_instance.size(); ++i) {
        id.owner_instance[i] = static_cast<std::uint8_t>(seed + 17 * i + 1);
    }
    id.owner_instance[0] = static_cast<std::uint8_t>(seed | 1);
    id.buffer_id = buffer_id;
    id.generation = generation;
    return id;
}

inline BufferDescriptor shm_descriptor(std::uint64_t nbytes = 4096, Access access = Access::READWRITE,
                                       const CanonicalIdentity& id = identity()) {
    return make_posix_shm_descriptor(id, nbytes, access, "canopy-test");
}

inline BufferDescriptor vmm_descriptor(std::uint64_t nbytes = 1 << 20, std::uint32_t device = 1,
                                       Backend backend = Backend::CUDA_VMM) {
    return make_vmm_descriptor(backend, identity(), nbytes, Access::READWRITE, device);
}

inline BufferDescriptor fork_descriptor(Backend backend = Backend::FORK_SHM, Access access = Access::READ,
                                        std::uint64_t base = 0x7f0000001000ULL) {
    return make_fork_descriptor(backend, identity(), 1 << 20, access, base);
}

// A view built field by field, without validation, so that tests can feed invalid ones.
inline Tensor raw_tensor(const BufferDescriptor& buffer, DataType dtype, std::vector<std::uint32_t> shapes,
                         std::vector<std::uint32_t> strides, std::uint64_t byte_offset = 0) {
    Tensor t{};
    t.buffer = buffer;
    t.dtype = dtype;
    t.byte_offset = byte_offset;
    t.ndims = static_cast<std::uint8_t>(shapes.size());
    for (std::size_t i = 0; i < shapes.size() && i < MAX_DIMS; ++i) {
        t.shapes[i] = shapes[i];
    }
    for (std::size_t i = 0; i < strides.size() && i < MAX_DIMS; ++i) {
        t.strides[i] = strides[i];
    }
    return t;
}

inline std::span<const std::byte> as_bytes_of(const std::vector<std::byte>& v) {
    return {v.data(), v.size()};
}

template <class T>
std::vector<std::uint8_t> bytes_of(const T& value) {
    std::vector<std::uint8_t> out(sizeof(T));
    std::memcpy(out.data(), &value, sizeof(T));
    return out;
}

inline void put_u16(std::vector<std::byte>& blob, std::size_t at, std::uint16_t v) {
    blob.at(at) = static_cast<std::byte>(v & 0xff);
    blob.at(at + 1) = static_cast<std::byte>(v >> 8);
}

inline void put_u32(std::vector<std::byte>& blob, std::size_t at, std::uint32_t v) {
    for (std::size_t i = 0; i < 4; ++i) {
        blob.at(at + i) = static_cast<std::byte>((v >> (8 * i)) & 0xff);
    }
}

inline std::uint64_t get_le(const std::vector<std::byte>& blob, std::size_t at, std::size_t n) {
    std::uint64_t v = 0;
    for (std::size_t i = n; i-- > 0;) {
        v = (v << 8) | std::to_integer<std::uint64_t>(blob.at(at + i));
    }
    return v;
}

// Runs `fn`, requires that it throws a WireError with exactly `field` and `code` and whose what() is
// "FIELD: PROBLEM", and returns the error for further checks. `line` names the caller in the report.
template <class F>
WireError require_wire_error(F&& fn, ErrorCode code, std::string_view field, int line) {
    INFO("expected WireError at line " << line << " with field '" << field << "'");
    try {
        fn();
    } catch (const WireError& e) {
        CAPTURE(e.what());
        CHECK(e.field() == field);
        CHECK(e.code() == code);
        CHECK_THAT(std::string(e.what()), Catch::Contains(std::string(field)));
        // what() is a C string: a NUL quoted from the input ends it early.
        const std::string full = e.field() + ": " + e.problem();
        CHECK(std::string(e.what()) == full.substr(0, full.find('\0')));
        return e;
    }
    FAIL("no WireError was thrown");
    throw std::logic_error("unreachable");
}

} // namespace canopy::test

// Evaluates `expr` and checks the WireError it must throw; yields the error.
#define REQUIRE_WIRE_ERROR(expr, code, field)                                                                          \
    ::canopy::test::require_wire_error([&] { (void)(expr); }, (code), (field), __LINE__)
