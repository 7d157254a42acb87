// The table of built-in kernels, and check_builtin / run_builtin / builtin_names over it.
#include "worker/kernels/builtin.h"

#include "protocol/builtin_launch.h"
#include "worker/kernels/detail/kernels.h"
#include "worker/kernels/detail/signature.h"

#include <array>
#include <cstdio>
#include <string>

namespace canopy::kernels {
namespace {

using detail::fail;
using detail::KernelDef;
using detail::Offer;
using detail::Role;
using detail::ScalarParam;
using detail::ScalarRule;
using detail::Source;
using detail::TensorParam;

constexpr std::array<TensorParam, 1> OUT{{{"out", Role::OUT}}};
constexpr std::array<TensorParam, 1> X_INOUT{{{"x", Role::INOUT}}};
constexpr std::array<TensorParam, 2> IN_OUT{{{"in", Role::IN}, {"out", Role::OUT}}};
constexpr std::array<TensorParam, 2> AXPY_TENSORS{{{"x", Role::IN}, {"y", Role::INOUT}}};
constexpr std::array<TensorParam, 2> REDUCE_TENSORS{{{"x", Role::IN}, {"y", Role::OUT}}};
constexpr std::array<TensorParam, 3> MATMUL_TENSORS{{{"A", Role::IN}, {"B", Role::IN}, {"C", Role::OUT}}};
constexpr std::array<TensorParam, 2> PEER_TENSORS{{{"S", Role::IN}, {"out", Role::OUT}}};

constexpr std::array<ScalarParam, 1> VALUE{{{"value", ScalarRule::ANY}}};
constexpr std::array<ScalarParam, 1> FACTOR{{{"a", ScalarRule::ANY}}};
constexpr std::array<ScalarParam, 1> PE{{{"pe", ScalarRule::INT64}}};
constexpr std::array<ScalarParam, 1> MS{{{"ms", ScalarRule::INT64}}};

constexpr std::span<const TensorParam> NO_TENSORS{};
constexpr std::span<const ScalarParam> NO_SCALARS{};

// name, offer, source, tensors, scalars, check, run
const std::array<KernelDef, 12> KERNELS{{
    {"fill", Offer::CHIP_AND_SUB, Source::OWN_BASE, OUT, VALUE, nullptr, detail::run_fill},
    {"iota", Offer::CHIP_AND_SUB, Source::OWN_BASE, OUT, NO_SCALARS, nullptr, detail::run_iota},
    {"copy", Offer::CHIP_AND_SUB, Source::OWN_BASE, IN_OUT, NO_SCALARS, detail::check_copy, detail::run_copy},
    {"scale", Offer::CHIP_AND_SUB, Source::OWN_BASE, X_INOUT, FACTOR, nullptr, detail::run_scale},
    {"axpy", Offer::CHIP_AND_SUB, Source::OWN_BASE, AXPY_TENSORS, FACTOR, detail::check_axpy, detail::run_axpy},
    {"reduce_sum", Offer::CHIP_AND_SUB, Source::OWN_BASE, REDUCE_TENSORS, NO_SCALARS, detail::check_reduce_sum,
     detail::run_reduce_sum},
    {"matmul", Offer::CHIP_ONLY, Source::OWN_BASE, MATMUL_TENSORS, NO_SCALARS, detail::check_matmul,
     detail::run_matmul},
    {"peer_read", Offer::CHIP_ONLY, Source::PEER_TABLE, PEER_TENSORS, PE, detail::check_peer_read,
     detail::run_peer_read},
    {"allgather", Offer::CHIP_ONLY, Source::PEER_TABLE, PEER_TENSORS, NO_SCALARS, detail::check_allgather,
     detail::run_allgather},
    {"sleep_ms", Offer::CHIP_AND_SUB, Source::OWN_BASE, NO_TENSORS, MS, detail::check_sleep_ms, detail::run_sleep_ms,
     true},
    {"abort", Offer::FAULT, Source::OWN_BASE, NO_TENSORS, NO_SCALARS, nullptr, detail::run_abort},
    {"segfault", Offer::FAULT, Source::OWN_BASE, NO_TENSORS, NO_SCALARS, nullptr, detail::run_segfault},
}};

bool offered_to(const KernelDef& def, WorkerKind kind) noexcept {
    return kind == WorkerKind::CHIP || def.offer != Offer::CHIP_ONLY;
}

std::string joined_names(WorkerKind kind, bool fault_kernels_enabled) {
    std::string names;
    for (std::string_view name : builtin_names(kind, fault_kernels_enabled)) {
        names += names.empty() ? "" : ", ";
        names += name;
    }
    return names;
}

// The kernel's entry, or UNKNOWN_KERNEL saying why this worker kind does not offer it.
const KernelDef& find_offered(WorkerKind kind, const KernelCall& call, bool fault_kernels_enabled) {
    for (const KernelDef& def : KERNELS) {
        if (def.name != call.name) {
            continue;
        }
        if (!offered_to(def, kind)) {
            const char* other = kind == WorkerKind::CHIP ? "sub" : "chip";
            fail(ErrorCode::UNKNOWN_KERNEL, call,
                 std::string("offered by ") + other + " workers only, not by " + to_string(kind) + " workers");
        }
        if (def.offer == Offer::FAULT && !fault_kernels_enabled) {
            fail(ErrorCode::UNKNOWN_KERNEL, call,
                 "fault kernels are disabled (enable them with \"testing\": {\"fault_kernels\": true})");
        }
        return def;
    }
    throw KernelError(ErrorCode::UNKNOWN_KERNEL, "unknown kernel '" + std::string(call.name) + "'; " + to_string(kind) +
                                                     " workers offer " + joined_names(kind, fault_kernels_enabled));
}

// Undefined bits, and tf32 on a kernel other than matmul (matmul checks its own dtype).
void check_launch_flags(const KernelCall& call) {
    const std::uint32_t unknown = call.launch_flags & ~BUILTIN_LAUNCH_FLAGS;
    if (unknown != 0) {
        char hex[16];
        std::snprintf(hex, sizeof hex, "0x%x", unknown);
        fail(ErrorCode::BAD_REQUEST, call,
             std::string("launch flags ") + hex + " are not defined (bit 0 is tf32, the only launch flag)");
    }
    if ((call.launch_flags & BUILTIN_LAUNCH_TF32) != 0 && call.name != "matmul") {
        fail(ErrorCode::BAD_REQUEST, call, "launch.tf32 applies to matmul only");
    }
}

const KernelDef& checked(WorkerKind kind, const KernelCall& call, bool fault_kernels_enabled) {
    const KernelDef& def = find_offered(kind, call, fault_kernels_enabled);
    detail::check_params(def, call);
    check_launch_flags(call);
    if (def.check != nullptr) {
        def.check(call);
    }
    return def;
}

// Every tensor a kernel reads or writes through its own base has one; a peer source has a peer table whose
// bases are sound. The tensors a kernel only holds (sleep_ms's) need none: on a cuda chip a device buffer has no
// host mapping.
void check_bases(const KernelDef& def, const KernelCall& call) {
    const std::size_t touched = def.holds_extra_tensors ? def.tensors.size() : call.tensors.size();
    for (std::size_t i = def.source == Source::PEER_TABLE ? 1 : 0; i < touched; ++i) {
        if (call.tensors[i].base == nullptr) {
            fail(ErrorCode::KERNEL_FAILED, call, detail::arg_name(i) + " has no mapping");
        }
    }
    if (def.source != Source::PEER_TABLE) {
        return;
    }
    if (call.peers == nullptr) {
        fail(ErrorCode::BAD_REQUEST, call, "args[0] is not over a symmetric buffer (no peer table)");
    }
    detail::check_peer_bases(call);
}

} // namespace

const char* to_string(WorkerKind kind) noexcept {
    return kind == WorkerKind::CHIP ? "chip" : "sub";
}

void check_builtin(WorkerKind kind, const KernelCall& call, bool fault_kernels_enabled) {
    checked(kind, call, fault_kernels_enabled);
}

void run_builtin(WorkerKind kind, const KernelCall& call, bool fault_kernels_enabled) {
    const KernelDef& def = checked(kind, call, fault_kernels_enabled);
    check_bases(def, call);
    def.run(call);
}

std::vector<std::string_view> builtin_names(WorkerKind kind, bool fault_kernels_enabled) {
    std::vector<std::string_view> names;
    for (const KernelDef& def : KERNELS) {
        if (offered_to(def, kind) && (fault_kernels_enabled || def.offer != Offer::FAULT)) {
            names.push_back(def.name);
        }
    }
    return names;
}

} // namespace canopy::kernels
