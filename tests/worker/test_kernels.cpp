// check_builtin: the offer of each worker kind and every rejection of a call's signature.
#include "test_kernels_support.h"

#include <chrono>

using namespace canopy;
using namespace canopy::kernels;
using namespace canopy::kernels::test;

namespace {

const std::vector<std::string_view> SUB_NAMES{"fill", "iota", "copy", "scale", "axpy", "reduce_sum", "sleep_ms"};
const std::vector<std::string_view> CHIP_NAMES{"fill",       "iota",   "copy",      "scale",     "axpy",
                                               "reduce_sum", "matmul", "peer_read", "allgather", "sleep_ms"};

} // namespace

TEST_CASE("sub workers offer the element-wise built-ins and sleep_ms", "[kernels]") {
    CHECK(builtin_names(WorkerKind::SUB, false) == SUB_NAMES);
}

TEST_CASE("chip workers offer every built-in", "[kernels]") {
    CHECK(builtin_names(WorkerKind::CHIP, false) == CHIP_NAMES);
}

TEST_CASE("the fault kernels are listed only when enabled", "[kernels]") {
    for (WorkerKind kind : BOTH_KINDS) {
        const auto names = builtin_names(kind, true);
        REQUIRE(names.size() >= 2);
        CHECK(names[names.size() - 2] == "abort");
        CHECK(names.back() == "segfault");
        CHECK(builtin_names(kind, false).size() == names.size() - 2);
    }
}

TEST_CASE("an unknown kernel is refused naming it and the kernels on offer", "[kernels]") {
    CallBuilder b("frobnicate");
    require_check_error(WorkerKind::SUB, b, ErrorCode::UNKNOWN_KERNEL, "unknown kernel 'frobnicate'");
    require_check_error(WorkerKind::SUB, b, ErrorCode::UNKNOWN_KERNEL, "sub workers offer fill, iota, copy");
    require_run_error(WorkerKind::CHIP, b, ErrorCode::UNKNOWN_KERNEL, "chip workers offer fill");
}

TEST_CASE("a chip-only kernel is refused on a sub worker naming the kinds that offer it", "[kernels]") {
    FakeBuffer buf(256);
    const Tensor m = make_view(buf, DataType::FLOAT32, {2, 2});
    CallBuilder mm("matmul");
    mm.in(m, buf).in(m, buf).out(make_view(buf, DataType::FLOAT32, {2, 2}, {}, 64), buf);
    check(WorkerKind::CHIP, mm);
    require_check_error(WorkerKind::SUB, mm, ErrorCode::UNKNOWN_KERNEL,
                        "matmul: offered by chip workers only, not by sub workers");
    for (const char* name : {"peer_read", "allgather"}) {
        CallBuilder b(name);
        require_check_error(WorkerKind::SUB, b, ErrorCode::UNKNOWN_KERNEL, "offered by chip workers only");
    }
}

TEST_CASE("the fault kernels are refused while fault kernels are disabled", "[kernels]") {
    for (WorkerKind kind : BOTH_KINDS) {
        for (const char* name : {"abort", "segfault"}) {
            CallBuilder b(name);
            require_check_error(kind, b, ErrorCode::UNKNOWN_KERNEL, "fault kernels are disabled");
            require_run_error(kind, b, ErrorCode::UNKNOWN_KERNEL, "fault kernels are disabled");
            check(kind, b, true);
        }
    }
}

TEST_CASE("a wrong number of tensor arguments is refused", "[kernels]") {
    FakeBuffer buf(64);
    const Tensor v = make_view(buf, DataType::FLOAT32, {4});
    CallBuilder three("copy");
    three.in(v, buf).out(v, buf).out(v, buf);
    require_check_error(WorkerKind::SUB, three, ErrorCode::BAD_REQUEST,
                        "copy: takes 2 tensor arguments (in, out), got 3");
    CallBuilder none("iota");
    require_check_error(WorkerKind::SUB, none, ErrorCode::BAD_REQUEST, "iota: takes 1 tensor argument (out), got 0");
}

TEST_CASE("sleep_ms holds any tensor arguments and touches none of them", "[kernels]") {
    FakeBuffer buf(64);
    const Tensor v = make_view(buf, DataType::FLOAT32, {4});
    CallBuilder sleeper("sleep_ms");
    sleeper.out(v, buf).in(v, buf).scalar(ScalarArg::i64(1));
    const auto before = buf.bytes();
    run(WorkerKind::SUB, sleeper);
    CHECK(buf.bytes() == before);
    CallBuilder no_ms("sleep_ms");
    no_ms.out(v, buf);
    require_check_error(WorkerKind::SUB, no_ms, ErrorCode::BAD_REQUEST,
                        "sleep_ms: takes 1 scalar argument (ms), got 0");
    // A held view needs no host mapping: a cuda chip holds device memory this way.
    CallBuilder unmapped("sleep_ms");
    unmapped.tensor(v, TensorTag::INPUT, nullptr).tensor(v, TensorTag::OUTPUT, nullptr).scalar(ScalarArg::i64(0));
    run(WorkerKind::CHIP, unmapped);
}

TEST_CASE("a tensor argument with the wrong tag is refused", "[kernels]") {
    FakeBuffer buf(128);
    const Tensor a = make_view(buf, DataType::FLOAT32, {4});
    const Tensor b = make_view(buf, DataType::FLOAT32, {4}, {}, 64);
    CallBuilder copy_in_out("copy");
    copy_in_out.in(a, buf).in(b, buf);
    require_check_error(WorkerKind::SUB, copy_in_out, ErrorCode::BAD_REQUEST,
                        "copy: args[1] (out) is tagged input, must be output or inout");
    CallBuilder copy_out_in("copy");
    copy_out_in.out(a, buf).out(b, buf);
    require_check_error(WorkerKind::SUB, copy_out_in, ErrorCode::BAD_REQUEST,
                        "copy: args[0] (in) is tagged output, must be input");
    CallBuilder scale("scale");
    scale.out(a, buf).scalar(ScalarArg::f32(2));
    require_check_error(WorkerKind::CHIP, scale, ErrorCode::BAD_REQUEST,
                        "scale: args[0] (x) is tagged output, must be inout");
    CallBuilder bad_tag("fill");
    bad_tag.tensor(a, static_cast<TensorTag>(9), buf.base()).scalar(ScalarArg::f32(1));
    require_check_error(WorkerKind::CHIP, bad_tag, ErrorCode::BAD_REQUEST, "is tagged invalid tag 9");
}

TEST_CASE("fill and iota accept an inout output", "[kernels]") {
    FakeBuffer buf(16);
    CallBuilder fill("fill");
    fill.inout(make_view(buf, DataType::INT32, {4}), buf).scalar(ScalarArg::i64(7));
    run(WorkerKind::SUB, fill);
    CHECK(buf.get<std::int32_t>(3) == 7);
}

TEST_CASE("a dtype mismatch between arguments is refused", "[kernels]") {
    FakeBuffer buf(128);
    CallBuilder b("copy");
    b.in(make_view(buf, DataType::FLOAT32, {4}), buf).out(make_view(buf, DataType::INT8, {4}, {}, 64), buf);
    require_check_error(WorkerKind::SUB, b, ErrorCode::BAD_REQUEST,
                        "copy: args[1] has dtype int8, args[0] has float32");
    CallBuilder axpy("axpy");
    axpy.in(make_view(buf, DataType::FLOAT16, {4}), buf)
        .inout(make_view(buf, DataType::BFLOAT16, {4}, {}, 64), buf)
        .scalar(ScalarArg::f32(1));
    require_check_error(WorkerKind::CHIP, axpy, ErrorCode::BAD_REQUEST,
                        "axpy: args[1] has dtype bfloat16, args[0] has float16");
}

TEST_CASE("an element-count mismatch is refused and nothing is written", "[kernels]") {
    FakeBuffer in(64, std::byte{0});
    FakeBuffer out(48);
    CallBuilder b("copy");
    b.in(make_view(in, DataType::FLOAT32, {4, 4}), in).out(make_view(out, DataType::FLOAT32, {12}), out);
    require_check_error(WorkerKind::SUB, b, ErrorCode::BAD_REQUEST, "copy: args[1] has 12 elements, args[0] has 16");
    require_run_error(WorkerKind::SUB, b, ErrorCode::BAD_REQUEST, "copy: args[1] has 12 elements, args[0] has 16");
    CHECK(out.bytes() == std::vector<std::byte>(48, std::byte{0xEE}));

    CallBuilder axpy("axpy");
    axpy.in(make_view(in, DataType::FLOAT32, {4}), in)
        .inout(make_view(out, DataType::FLOAT32, {5}), out)
        .scalar(ScalarArg::f64(1));
    require_check_error(WorkerKind::SUB, axpy, ErrorCode::BAD_REQUEST, "axpy: args[1] has 5 elements, args[0] has 4");
}

TEST_CASE("reduce_sum refuses an output of more than one element", "[kernels]") {
    FakeBuffer buf(64);
    CallBuilder b("reduce_sum");
    b.in(make_view(buf, DataType::INT32, {4}), buf).out(make_view(buf, DataType::INT32, {2}, {}, 32), buf);
    require_check_error(WorkerKind::SUB, b, ErrorCode::BAD_REQUEST,
                        "reduce_sum: args[1] has 2 elements, must have exactly 1");
}

TEST_CASE("a missing or extra scalar is refused", "[kernels]") {
    FakeBuffer buf(64);
    const Tensor v = make_view(buf, DataType::FLOAT32, {4});
    CallBuilder fill("fill");
    fill.out(v, buf);
    require_check_error(WorkerKind::SUB, fill, ErrorCode::BAD_REQUEST, "fill: takes 1 scalar argument (value), got 0");
    CallBuilder scale("scale");
    scale.inout(v, buf);
    require_check_error(WorkerKind::CHIP, scale, ErrorCode::BAD_REQUEST, "scale: takes 1 scalar argument (a), got 0");
    CallBuilder sleeper("sleep_ms");
    require_check_error(WorkerKind::SUB, sleeper, ErrorCode::BAD_REQUEST,
                        "sleep_ms: takes 1 scalar argument (ms), got 0");
    CallBuilder iota("iota");
    iota.out(v, buf).scalar(ScalarArg::i64(1));
    require_check_error(WorkerKind::SUB, iota, ErrorCode::BAD_REQUEST, "iota: takes no scalar arguments, got 1");
}

TEST_CASE("a scalar of the wrong or an invalid kind is refused", "[kernels]") {
    CallBuilder sleeper("sleep_ms");
    sleeper.scalar(ScalarArg::f64(5));
    require_check_error(WorkerKind::SUB, sleeper, ErrorCode::BAD_REQUEST,
                        "sleep_ms: scalars[0] (ms) is float64, must be int64");
    FakeBuffer buf(16);
    CallBuilder fill("fill");
    fill.out(make_view(buf, DataType::FLOAT32, {4}), buf).scalar(ScalarArg{static_cast<ScalarKind>(7), 0});
    require_check_error(WorkerKind::SUB, fill, ErrorCode::BAD_REQUEST, "fill: scalars[0] (value) has invalid kind 7");
}

TEST_CASE("sleep_ms refuses a duration outside 0..3600000", "[kernels]") {
    for (std::int64_t ms : {std::int64_t{-1}, std::int64_t{3'600'001}}) {
        CallBuilder b("sleep_ms");
        b.scalar(ScalarArg::i64(ms));
        require_check_error(WorkerKind::CHIP, b, ErrorCode::BAD_REQUEST,
                            "sleep_ms: scalars[0] (ms) is " + std::to_string(ms) + ", must be in 0..3600000");
    }
}

TEST_CASE("sleep_ms sleeps for the given milliseconds on both kinds", "[kernels]") {
    for (WorkerKind kind : BOTH_KINDS) {
        CallBuilder b("sleep_ms");
        b.scalar(ScalarArg::i64(20));
        const auto start = std::chrono::steady_clock::now();
        run(kind, b);
        CHECK(std::chrono::steady_clock::now() - start >= std::chrono::milliseconds(20));
        CallBuilder zero("sleep_ms");
        zero.scalar(ScalarArg::i64(0));
        run(kind, zero);
    }
}

TEST_CASE("a tensor argument without a view is refused", "[kernels]") {
    FakeBuffer buf(16);
    CallBuilder b("iota");
    b.out(make_view(buf, DataType::FLOAT32, {4}), buf);
    KernelCall call = b.call();
    const BoundTensor no_view{nullptr, TensorTag::OUTPUT, buf.base()};
    call.tensors = std::span<const BoundTensor>(&no_view, 1);
    require_kernel_error([&] { check_builtin(WorkerKind::SUB, call, false); }, ErrorCode::BAD_REQUEST,
                         "iota: args[0] (out) has no view");
}

TEST_CASE("running a call whose tensor has no mapping fails without writing", "[kernels]") {
    FakeBuffer in(16, std::byte{0});
    const Tensor v = make_view(in, DataType::FLOAT32, {4});
    CallBuilder b("copy");
    b.in(v, in).tensor(v, TensorTag::OUTPUT, nullptr);
    check(WorkerKind::SUB, b);
    require_run_error(WorkerKind::SUB, b, ErrorCode::KERNEL_FAILED, "copy: args[1] has no mapping");
}
