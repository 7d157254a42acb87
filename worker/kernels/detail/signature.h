#pragma once
// Kernel signatures and the checks every kernel shares: parameter lists, tag and scalar-kind rules, and the
// agreement helpers the kernels' own checks are written with. Every failure throws KernelError with a message
// "KERNEL: PROBLEM" that names the argument as args[i] or scalars[i].
//
// Thread safety: pure functions over constant tables.

#include "worker/kernels/builtin.h"

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>

namespace canopy::kernels::detail {

// What a kernel does with a tensor parameter, and so which tags it accepts.
enum class Role : std::uint8_t {
    IN,    // read only: INPUT
    OUT,   // written, maybe read back: OUTPUT or INOUT
    INOUT, // read, then written: INOUT
};

// Which scalar kinds a scalar parameter accepts.
enum class ScalarRule : std::uint8_t {
    ANY,   // FLOAT32, FLOAT64 or INT64, converted to the dtype it meets
    INT64, // INT64 only
};

struct TensorParam {
    std::string_view name;
    Role role;
};

struct ScalarParam {
    std::string_view name;
    ScalarRule rule;
};

// Which worker kinds offer a kernel.
enum class Offer : std::uint8_t {
    CHIP_AND_SUB,
    CHIP_ONLY,
    FAULT, // chip and sub, only while fault kernels are enabled
};

// Where a kernel reads tensors[0] from.
enum class Source : std::uint8_t {
    OWN_BASE,   // its BoundTensor's base, like every other tensor
    PEER_TABLE, // the peer table's bases; its own base may be null
};

struct KernelDef {
    std::string_view name;
    Offer offer;
    Source source;
    std::span<const TensorParam> tensors;
    std::span<const ScalarParam> scalars;
    void (*check)(const KernelCall&); // agreement rules past the parameter lists; nullptr when none
    void (*run)(const KernelCall&);   // REQUIRES: the call passed check_builtin and its bases are valid
    // Accepts any number of tensor arguments besides `tensors` and touches none of them: sleep_ms holds
    // views so that tests and users can see the scheduler order work without moving data.
    bool holds_extra_tensors = false;
};

[[noreturn]] void fail(ErrorCode code, const KernelCall& call, const std::string& problem);

// "args[3]" / "scalars[0]".
std::string arg_name(std::size_t index);
std::string scalar_name(std::size_t index);

// Counts, views, tags and scalar kinds against the parameter lists (BAD_REQUEST).
void check_params(const KernelDef& def, const KernelCall& call);

// BAD_REQUEST unless args[a] and args[b] have the same dtype: "copy: args[1] has dtype int8, args[0] has
// float32".
void expect_same_dtype(const KernelCall& call, std::size_t a, std::size_t b);
// BAD_REQUEST unless args[a] has `count` elements: "copy: args[1] has 12 elements, args[0] has 16" (with
// `what` = "args[0] has 16").
void expect_count(const KernelCall& call, std::size_t a, std::uint64_t count, const std::string& what);
// expect_count against args[b]'s element count.
void expect_same_count(const KernelCall& call, std::size_t a, std::size_t b);

DataType dtype_of(const KernelCall& call, std::size_t index) noexcept;
std::uint64_t count_of(const KernelCall& call, std::size_t index) noexcept;

} // namespace canopy::kernels::detail
