// The launch flags of built-in calls (protocol/builtin_launch.h) as check_builtin sees them: tf32 only on a
// float32 matmul, no undefined bit on any kernel; and the CPU's matmul, which ignores tf32.
#include "protocol/builtin_launch.h"
#include "test_kernels_support.h"

using namespace canopy;
using namespace canopy::kernels;
using namespace canopy::kernels::test;

namespace {

// A 3x4 · 4x2 matmul of `dtype` over fake buffers, with values whose products need more than TF32's 10 bits.
struct Product {
    DataType dtype;
    FakeBuffer a{8 * 12}, b{8 * 8}, c{8 * 6};
    CallBuilder call{"matmul"};

    explicit Product(DataType t, std::uint32_t flags) : dtype(t) {
        for (std::size_t i = 0; i < 12; ++i) {
            a.set<float>(i, 1.0f + static_cast<float>(i) / 4096.0f);
        }
        for (std::size_t i = 0; i < 8; ++i) {
            b.set<float>(i, 1.0f - static_cast<float>(i) / 2048.0f);
        }
        call.in(make_view(a, dtype, {3, 4}), a).in(make_view(b, dtype, {4, 2}), b).out(make_view(c, dtype, {3, 2}), c);
        call.launch_flags(flags);
    }
};

} // namespace

TEST_CASE("tf32 passes the check of a float32 matmul, whose CPU result is the same with or without it",
          "[kernels][launch]") {
    Product plain(DataType::FLOAT32, 0);
    Product tf32(DataType::FLOAT32, BUILTIN_LAUNCH_TF32);
    run(WorkerKind::CHIP, plain.call);
    run(WorkerKind::CHIP, tf32.call);
    CHECK(plain.c.bytes() == tf32.c.bytes());
    CHECK(plain.c.get<float>(0) != 0.0f);
}

TEST_CASE("tf32 on a matmul of another dtype is refused naming the dtype", "[kernels][launch]") {
    for (DataType dtype : {DataType::FLOAT64, DataType::FLOAT16, DataType::BFLOAT16}) {
        const Product p(dtype, BUILTIN_LAUNCH_TF32);
        require_check_error(WorkerKind::CHIP, p.call, ErrorCode::BAD_REQUEST,
                            std::string("matmul: launch.tf32 applies to float32 only; args[0] has dtype ") +
                                to_string(dtype));
    }
}

TEST_CASE("tf32 on any kernel but matmul is refused on both worker kinds", "[kernels][launch]") {
    for (WorkerKind kind : BOTH_KINDS) {
        FakeBuffer x(64), y(4);
        CallBuilder fill("fill");
        fill.out(make_view(x, DataType::FLOAT32, {16}), x)
            .scalar(ScalarArg::f32(1.0f))
            .launch_flags(BUILTIN_LAUNCH_TF32);
        require_check_error(kind, fill, ErrorCode::BAD_REQUEST, "fill: launch.tf32 applies to matmul only");
        CallBuilder sum("reduce_sum");
        sum.in(make_view(x, DataType::FLOAT32, {16}), x)
            .out(make_view(y, DataType::FLOAT32, {1}), y)
            .launch_flags(BUILTIN_LAUNCH_TF32);
        require_run_error(kind, sum, ErrorCode::BAD_REQUEST, "reduce_sum: launch.tf32 applies to matmul only");
        CallBuilder sleep("sleep_ms");
        sleep.scalar(ScalarArg::i64(0)).launch_flags(BUILTIN_LAUNCH_TF32);
        require_check_error(kind, sleep, ErrorCode::BAD_REQUEST, "sleep_ms: launch.tf32 applies to matmul only");
        CHECK(y.get<std::uint32_t>(0) == 0xEEEEEEEEu); // refused before anything ran
    }
}

TEST_CASE("undefined launch flag bits are refused on every kernel", "[kernels][launch]") {
    const Product p(DataType::FLOAT32, BUILTIN_LAUNCH_TF32 | 0x100u);
    require_check_error(WorkerKind::CHIP, p.call, ErrorCode::BAD_REQUEST,
                        "matmul: launch flags 0x100 are not defined (bit 0 is tf32, the only launch flag)");
    FakeBuffer x(64);
    CallBuilder iota("iota");
    iota.out(make_view(x, DataType::INT32, {16}), x).launch_flags(0x80000000u);
    require_check_error(WorkerKind::SUB, iota, ErrorCode::BAD_REQUEST, "iota: launch flags 0x80000000 are not defined");
}
