// The submit-time checks: requested access within the buffer's grant, and no overlapping writes within one
// task. Each rejection with its exact code, field and message.

#include "scheduler/checks.h"
#include "tests/scheduler/support.h"

using namespace canopy;
using namespace canopy::scheduler;
using namespace canopy::test;

namespace {

Tensor vec(const BufferDescriptor& b, std::uint32_t n = 16, std::uint64_t offset = 0) {
    return make_tensor(b, DataType::FLOAT32, {n}, {}, offset);
}

void run_access(std::vector<TensorArg> args) {
    check_access(args);
}

void run_overlap(std::vector<TensorArg> args) {
    check_no_overlapping_writes(args);
}

} // namespace

TEST_CASE("check_access accepts every tag the buffer's grant allows", "[scheduler]") {
    const BufferDescriptor rw = sched_buffer(4096, 1, Access::READWRITE);
    const BufferDescriptor r = sched_buffer(4096, 2, Access::READ);
    const BufferDescriptor w = sched_buffer(4096, 3, Access::WRITE);
    CHECK_NOTHROW(run_access({in(vec(rw)), out(vec(rw)), inout(vec(rw)), in(vec(r)), out(vec(w))}));
    CHECK_NOTHROW(run_access({}));
}

TEST_CASE("check_access refuses an input of a buffer without read access", "[scheduler]") {
    const BufferDescriptor w = sched_buffer(4096, 3, Access::WRITE);
    require_wire_error(
        [&] {
            run_access({out(vec(w)), in(vec(w))});
        },
        ErrorCode::ACCESS_DENIED, "args[1]", "input needs read access; the buffer grants write");
}

TEST_CASE("check_access refuses an output of a buffer without write access", "[scheduler]") {
    const BufferDescriptor r = sched_buffer(4096, 2, Access::READ);
    require_wire_error([&] { run_access({out(vec(r))}); }, ErrorCode::ACCESS_DENIED, "args[0]",
                       "output needs write access; the buffer grants read");
}

TEST_CASE("check_access refuses an inout that lacks either grant", "[scheduler]") {
    const BufferDescriptor rw = sched_buffer(4096, 1, Access::READWRITE);
    const BufferDescriptor r = sched_buffer(4096, 2, Access::READ);
    const BufferDescriptor w = sched_buffer(4096, 3, Access::WRITE);
    require_wire_error(
        [&] {
            run_access({in(vec(rw)), inout(vec(r))});
        },
        ErrorCode::ACCESS_DENIED, "args[1]", "inout needs write access; the buffer grants read");
    require_wire_error(
        [&] {
            run_access({in(vec(rw)), out(vec(rw)), inout(vec(w))});
        },
        ErrorCode::ACCESS_DENIED, "args[2]", "inout needs read access; the buffer grants write");
}

TEST_CASE("check_access refuses a tag that is not a TensorTag", "[scheduler]") {
    const BufferDescriptor rw = sched_buffer(4096, 1, Access::READWRITE);
    require_wire_error(
        [&] {
            run_access({in(vec(rw)), {vec(rw), static_cast<TensorTag>(0)}});
        },
        ErrorCode::INVALID_TENSOR, "args[1].tag", "unknown tag 0");
}

TEST_CASE("check_no_overlapping_writes accepts reads that overlap and writes that do not", "[scheduler]") {
    const BufferDescriptor a = sched_buffer(4096, 1);
    const BufferDescriptor b = sched_buffer(4096, 2);
    const BufferDescriptor m = sched_buffer(64 * 64 * 4, 3);
    CHECK_NOTHROW(run_overlap({in(vec(a)), in(vec(a)), in(vec(a, 8, 16))}));
    CHECK_NOTHROW(run_overlap({out(vec(a, 16, 0)), inout(vec(a, 16, 64)), in(vec(a, 4, 128))}));
    CHECK_NOTHROW(run_overlap({out(vec(a)), out(vec(b))}));
    CHECK_NOTHROW(run_overlap({out(matrix_block(m, 64, 0, 0, 64, 32)), inout(matrix_block(m, 64, 0, 32, 64, 32))}));
    CHECK_NOTHROW(run_overlap({}));
}

TEST_CASE("check_no_overlapping_writes refuses two writes of the same bytes naming both", "[scheduler]") {
    const BufferDescriptor a = sched_buffer(4096, 1);
    require_wire_error(
        [&] {
            run_overlap({out(vec(a)), out(vec(a))});
        },
        ErrorCode::OVERLAPPING_WRITES, "args[1]", "output overlaps args[0] (output) of the same buffer (covered)");
}

TEST_CASE("check_no_overlapping_writes refuses a read that overlaps a write", "[scheduler]") {
    const BufferDescriptor a = sched_buffer(4096, 1);
    const BufferDescriptor b = sched_buffer(4096, 2);
    require_wire_error(
        [&] {
            run_overlap({inout(vec(a, 16, 0)), in(vec(b)), in(vec(a, 16, 32))});
        },
        ErrorCode::OVERLAPPING_WRITES, "args[2]", "input overlaps args[0] (inout) of the same buffer (partial)");
    require_wire_error(
        [&] {
            run_overlap({in(vec(b)), in(vec(a, 64)), out(vec(a, 4, 16))});
        },
        ErrorCode::OVERLAPPING_WRITES, "args[2]", "output overlaps args[1] (input) of the same buffer (covered)");
}

TEST_CASE("check_no_overlapping_writes refuses a write over a matrix and its transpose", "[scheduler]") {
    const BufferDescriptor m = sched_buffer(64 * 64 * 4, 3);
    const Tensor plain = make_tensor(m, DataType::FLOAT32, {64, 64}, {64, 1});
    const Tensor transposed = make_tensor(m, DataType::FLOAT32, {64, 64}, {1, 64});
    require_wire_error(
        [&] {
            run_overlap({in(plain), out(transposed)});
        },
        ErrorCode::OVERLAPPING_WRITES, "args[1]", "output overlaps args[0] (input) of the same buffer (partial)");
}
