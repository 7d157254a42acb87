#include "worker/kernels/detail/signature.h"

#include <string>

namespace canopy::kernels::detail {
namespace {

const char* role_tags(Role role) noexcept {
    switch (role) {
    case Role::IN:
        return "input";
    case Role::OUT:
        return "output or inout";
    case Role::INOUT:
        return "inout";
    }
    return "?";
}

bool role_accepts(Role role, TensorTag tag) noexcept {
    switch (role) {
    case Role::IN:
        return tag == TensorTag::INPUT;
    case Role::OUT:
        return tag == TensorTag::OUTPUT || tag == TensorTag::INOUT;
    case Role::INOUT:
        return tag == TensorTag::INOUT;
    }
    return false;
}

std::string tag_name(TensorTag tag) {
    return is_valid(tag) ? std::string(to_string(tag)) : "invalid tag " + std::to_string(static_cast<int>(tag));
}

template <class Param>
std::string param_list(std::span<const Param> params) {
    std::string names;
    for (const Param& p : params) {
        names += names.empty() ? "" : ", ";
        names += p.name;
    }
    return names;
}

template <class Param>
void check_count(const KernelCall& call, std::span<const Param> params, std::size_t got, const char* noun) {
    if (got == params.size()) {
        return;
    }
    const std::string plural = params.size() == 1 ? "" : "s";
    const std::string expected = params.empty() ? std::string("no ") + noun + " arguments"
                                                : std::to_string(params.size()) + " " + noun + " argument" + plural +
                                                      " (" + param_list(params) + ")";
    fail(ErrorCode::BAD_REQUEST, call, "takes " + expected + ", got " + std::to_string(got));
}

void check_tensor(const KernelCall& call, std::size_t i, const TensorParam& param) {
    const BoundTensor& t = call.tensors[i];
    const std::string name = arg_name(i) + " (" + std::string(param.name) + ")";
    if (t.view == nullptr) {
        fail(ErrorCode::BAD_REQUEST, call, name + " has no view");
    }
    if (!is_valid(static_cast<DataType>(t.view->dtype))) {
        fail(ErrorCode::BAD_REQUEST, call, name + " has invalid dtype " + std::to_string(t.view->dtype.raw()));
    }
    if (tensor_element_count(*t.view) == UINT64_MAX) {
        fail(ErrorCode::BAD_REQUEST, call, name + " has more than 2^64 - 1 elements");
    }
    if (!role_accepts(param.role, t.tag)) {
        fail(ErrorCode::BAD_REQUEST, call,
             name + " is tagged " + tag_name(t.tag) + ", must be " + role_tags(param.role));
    }
}

void check_scalar(const KernelCall& call, std::size_t i, const ScalarParam& param) {
    const ScalarArg& s = call.scalars[i];
    const std::string name = scalar_name(i) + " (" + std::string(param.name) + ")";
    if (!is_valid(s.kind)) {
        fail(ErrorCode::BAD_REQUEST, call, name + " has invalid kind " + std::to_string(static_cast<int>(s.kind)));
    }
    if (param.rule == ScalarRule::INT64 && s.kind != ScalarKind::INT64) {
        fail(ErrorCode::BAD_REQUEST, call, name + " is " + to_string(s.kind) + ", must be int64");
    }
}

} // namespace

void fail(ErrorCode code, const KernelCall& call, const std::string& problem) {
    throw KernelError(code, std::string(call.name) + ": " + problem);
}

std::string arg_name(std::size_t index) {
    return "args[" + std::to_string(index) + "]";
}

std::string scalar_name(std::size_t index) {
    return "scalars[" + std::to_string(index) + "]";
}

void check_params(const KernelDef& def, const KernelCall& call) {
    if (!def.holds_extra_tensors || call.tensors.size() < def.tensors.size()) {
        check_count(call, def.tensors, call.tensors.size(), "tensor");
    }
    check_count(call, def.scalars, call.scalars.size(), "scalar");
    for (std::size_t i = 0; i < def.tensors.size(); ++i) {
        check_tensor(call, i, def.tensors[i]);
    }
    for (std::size_t i = 0; i < def.scalars.size(); ++i) {
        check_scalar(call, i, def.scalars[i]);
    }
}

DataType dtype_of(const KernelCall& call, std::size_t index) noexcept {
    return call.tensors[index].view->dtype;
}

std::uint64_t count_of(const KernelCall& call, std::size_t index) noexcept {
    return tensor_element_count(*call.tensors[index].view);
}

void expect_same_dtype(const KernelCall& call, std::size_t a, std::size_t b) {
    if (dtype_of(call, a) != dtype_of(call, b)) {
        fail(ErrorCode::BAD_REQUEST, call,
             arg_name(a) + " has dtype " + to_string(dtype_of(call, a)) + ", " + arg_name(b) + " has " +
                 to_string(dtype_of(call, b)));
    }
}

void expect_count(const KernelCall& call, std::size_t a, std::uint64_t count, const std::string& what) {
    if (count_of(call, a) != count) {
        fail(ErrorCode::BAD_REQUEST, call,
             arg_name(a) + " has " + std::to_string(count_of(call, a)) + " elements, " + what);
    }
}

void expect_same_count(const KernelCall& call, std::size_t a, std::size_t b) {
    expect_count(call, a, count_of(call, b), arg_name(b) + " has " + std::to_string(count_of(call, b)));
}

} // namespace canopy::kernels::detail
