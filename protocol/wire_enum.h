#pragma once
// The enumerations of the wire ABI and WireEnum, the one-byte field that stores them.
//
// A wire field holds the enumerator's raw value. Bytes arriving from another process may hold any value,
// so a field is never cast to the enum and trusted: validate_descriptor / validate_tensor refuse every
// value that is not a listed enumerator. Zero is never a valid enumerator, so a zeroed struct is invalid.
//
// Thread safety: plain values.

#include <cstdint>
#include <type_traits>

namespace canopy {

enum class Backend : std::uint8_t { POSIX_SHM = 1, CUDA_VMM = 2, SIM_VMM = 3, FORK_SHM = 4, FORK_COW = 5 };
// READWRITE is READ | WRITE.
enum class Access : std::uint8_t { READ = 1, WRITE = 2, READWRITE = 3 };
enum class AddressSpace : std::uint8_t { HOST = 1, DEVICE = 2 };
enum class DataType : std::uint8_t {
    FLOAT32 = 1,
    FLOAT16 = 2,
    BFLOAT16 = 3,
    FLOAT64 = 4,
    INT8 = 5,
    UINT8 = 6,
    INT16 = 7,
    INT32 = 8,
    INT64 = 9,
};

// A one-byte wire field holding an enumerator's value. It converts implicitly from the enum and from
// the raw byte, and to the enum for comparison and switch; raw() gives the stored byte. Trivially
// copyable and standard-layout, so it sits in wire structs like a uint8_t.
template <class E>
struct WireEnum {
    using Raw = std::underlying_type_t<E>;
    static_assert(sizeof(Raw) == 1, "wire enums are one byte");

    Raw value;

    WireEnum() = default;
    constexpr WireEnum(E e) noexcept : value(static_cast<Raw>(e)) {}
    constexpr WireEnum(Raw raw_value) noexcept : value(raw_value) {}

    constexpr operator E() const noexcept { return static_cast<E>(value); }
    constexpr Raw raw() const noexcept { return value; }
    friend constexpr bool operator==(WireEnum a, WireEnum b) noexcept { return a.value == b.value; }
    friend constexpr bool operator==(WireEnum a, E b) noexcept { return a.value == static_cast<Raw>(b); }
};

constexpr bool is_valid(Backend b) noexcept {
    return b >= Backend::POSIX_SHM && b <= Backend::FORK_COW;
}
constexpr bool is_valid(Access a) noexcept {
    return a >= Access::READ && a <= Access::READWRITE;
}
constexpr bool is_valid(AddressSpace s) noexcept {
    return s == AddressSpace::HOST || s == AddressSpace::DEVICE;
}
constexpr bool is_valid(DataType t) noexcept {
    return t >= DataType::FLOAT32 && t <= DataType::INT64;
}

// Element size in bytes; 0 for a value that is not a DataType enumerator.
constexpr std::uint32_t element_size(DataType t) noexcept {
    switch (t) {
    case DataType::INT8:
    case DataType::UINT8:
        return 1;
    case DataType::FLOAT16:
    case DataType::BFLOAT16:
    case DataType::INT16:
        return 2;
    case DataType::FLOAT32:
    case DataType::INT32:
        return 4;
    case DataType::FLOAT64:
    case DataType::INT64:
        return 8;
    }
    return 0;
}

constexpr bool grants_read(Access a) noexcept {
    return (static_cast<std::uint8_t>(a) & static_cast<std::uint8_t>(Access::READ)) != 0;
}
constexpr bool grants_write(Access a) noexcept {
    return (static_cast<std::uint8_t>(a) & static_cast<std::uint8_t>(Access::WRITE)) != 0;
}

// The address space a backend's memory lives in; every descriptor must state the matching one.
constexpr AddressSpace address_space_of(Backend b) noexcept {
    return (b == Backend::CUDA_VMM || b == Backend::SIM_VMM) ? AddressSpace::DEVICE : AddressSpace::HOST;
}

// Lower-case names used in JSON and logs ("float32", "posix_shm", "read").
const char* to_string(Backend b) noexcept;
const char* to_string(Access a) noexcept;
const char* to_string(AddressSpace s) noexcept;
const char* to_string(DataType t) noexcept;

} // namespace canopy
