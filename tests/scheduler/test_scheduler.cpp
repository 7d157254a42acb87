// Scheduler: the ordering rules (RAW, WAR, WAW, no RAR, disjoint views), the lifecycle, failure
// propagation and refused misuse, each on small named cases.

#include "tests/scheduler/support.h"

#include <stdexcept>

using namespace canopy;
using namespace canopy::scheduler;
using namespace canopy::test;

namespace {

// A 64 x 64 float32 matrix.
const BufferDescriptor MATRIX = sched_buffer(64 * 64 * 4, 3);

bool add(Scheduler& s, TaskId id, std::vector<TensorArg> args, std::string_view name = "t") {
    return s.add(id, name, args);
}

} // namespace

TEST_CASE("a read after a write waits for the write", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 1, {out(whole())}));
    CHECK_FALSE(add(s, 2, {in(whole())}));
    CHECK(s.state(2) == TaskState::WAITING);
    CHECK(pop_all(s) == Ids{1});
    CHECK(complete(s, 1) == Ids{2});
    CHECK(pop_all(s) == Ids{2});
}

TEST_CASE("a write after a read waits for the read", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 1, {in(whole())}));
    CHECK_FALSE(add(s, 2, {out(make_tensor(VEC, DataType::FLOAT32, {16}, {}, 64))}));
    CHECK(pop_all(s) == Ids{1});
    CHECK(complete(s, 1) == Ids{2});
}

TEST_CASE("a write after a write waits for the earlier write", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 1, {out(make_tensor(VEC, DataType::FLOAT32, {16}, {}, 64))}));
    CHECK_FALSE(add(s, 2, {inout(make_tensor(VEC, DataType::FLOAT32, {32}, {}, 32))}));
    CHECK(s.waiting_for(2) == 1U);
    CHECK(pop_all(s) == Ids{1});
    CHECK(complete(s, 1) == Ids{2});
}

TEST_CASE("reads of one view never order against each other", "[scheduler]") {
    Scheduler s;
    for (TaskId id = 1; id <= 5; ++id) {
        CHECK(add(s, id, {in(whole())}));
    }
    CHECK(pop_all(s) == Ids{1, 2, 3, 4, 5});
}

TEST_CASE("disjoint column blocks of one matrix are all ready at once", "[scheduler]") {
    Scheduler s;
    for (std::uint32_t c = 0; c < 16; ++c) {
        CHECK(add(s, c + 1, {out(matrix_block(MATRIX, 64, 0, 4 * c, 64, 4))}));
    }
    for (std::uint32_t r = 0; r < 8; ++r) {
        CHECK(add(s, 100 + r,
                  {in(make_tensor(OTHER, DataType::FLOAT32, {8}, {}, 32 * r)),
                   out(matrix_block(sched_buffer(64 * 64 * 4, 4), 64, 8 * r, 0, 8, 64))}));
    }
    CHECK(pop_all(s).size() == 24);
    // A column block that straddles two others waits for exactly those two.
    CHECK_FALSE(add(s, 50, {in(matrix_block(MATRIX, 64, 10, 6, 3, 4))}));
    CHECK(s.waiting_for(50) == 2U);
}

TEST_CASE("a row segment beside a column block does not wait for it", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 1, {out(matrix_block(MATRIX, 64, 0, 0, 64, 4))}));
    // Columns 8..15 of row 5 as a 1-D view: tensor_overlap cannot model the pair, the footprints can.
    const Tensor segment = make_tensor(MATRIX, DataType::FLOAT32, {8}, {}, (5 * 64 + 8) * 4);
    CHECK(tensor_overlap(segment, matrix_block(MATRIX, 64, 0, 0, 64, 4)) == Overlap::PARTIAL);
    CHECK(add(s, 2, {in(segment)}));
    // Columns 2..9 of row 5 do share bytes with the block.
    CHECK_FALSE(add(s, 3, {in(make_tensor(MATRIX, DataType::FLOAT32, {8}, {}, (5 * 64 + 2) * 4))}));
}

TEST_CASE("a view and a reshaped contiguous view of the same bytes are ordered", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 1, {out(make_tensor(MATRIX, DataType::FLOAT32, {64, 64}))}));
    CHECK_FALSE(add(s, 2, {in(make_tensor(MATRIX, DataType::FLOAT32, {64 * 64}))}));
    CHECK_FALSE(add(s, 3, {out(make_tensor(MATRIX, DataType::FLOAT32, {32, 128}))}));
    CHECK(s.waiting_for(3) == 2U);
    CHECK(pop_all(s) == Ids{1});
    CHECK(complete(s, 1) == Ids{2});
    CHECK(pop_all(s) == Ids{2});
    CHECK(complete(s, 2) == Ids{3});
}

TEST_CASE("views of different buffers are not ordered", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 1, {out(whole(VEC))}));
    CHECK(add(s, 2, {out(whole(OTHER))}));
    // The same slot in a later generation is a different buffer.
    CHECK(add(s, 3, {out(whole(sched_buffer(4096, 1, Access::READWRITE, 2)))}));
    CHECK(pop_all(s) == Ids{1, 2, 3});
}

TEST_CASE("a task waits for every conflicting task and becomes ready with the last one", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 1, {out(whole(VEC))}));
    CHECK(add(s, 2, {out(whole(OTHER))}));
    CHECK_FALSE(add(s, 3, {in(whole(VEC)), in(whole(OTHER)), out(whole(MATRIX))}));
    CHECK(s.waiting_for(3) == 2U);
    CHECK(pop_all(s) == Ids{1, 2});
    CHECK(complete(s, 2).empty());
    CHECK(s.waiting_for(3) == 1U);
    CHECK(complete(s, 1) == Ids{3});
}

TEST_CASE("a finished task no longer orders later tasks", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 1, {out(whole())}));
    CHECK(pop_all(s) == Ids{1});
    CHECK(complete(s, 1).empty());
    CHECK(s.unfinished() == 0);
    CHECK(add(s, 2, {in(whole())}));
    CHECK(s.state(1) == std::nullopt);
}

TEST_CASE("pop_ready hands out ready tasks in submission order", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 10, {out(whole(VEC))}));
    CHECK_FALSE(add(s, 11, {inout(whole(VEC))}));
    CHECK(add(s, 12, {out(whole(OTHER))}));
    CHECK(s.pop_ready() == TaskId{10});
    CHECK(s.state(10) == TaskState::RUNNING);
    CHECK(complete(s, 10) == Ids{11});
    // 11 became ready after 12 but was submitted before it.
    CHECK(pop_all(s) == Ids{11, 12});
    CHECK(s.pop_ready() == std::nullopt);
}

TEST_CASE("a writer after many readers waits for all of them", "[scheduler]") {
    Scheduler s;
    for (TaskId id = 1; id <= 20; ++id) {
        CHECK(add(s, id, {in(whole())}));
    }
    CHECK_FALSE(add(s, 21, {inout(whole())}));
    CHECK(s.waiting_for(21) == 20U);
    CHECK_FALSE(add(s, 22, {in(make_tensor(VEC, DataType::FLOAT32, {4}, {}, 16))}));
    CHECK(s.waiting_for(22) == 1U); // the readers are reached through the writer
    pop_all(s);
    for (TaskId id = 1; id <= 19; ++id) {
        CHECK(complete(s, id).empty());
    }
    CHECK(complete(s, 20) == Ids{21});
    CHECK(pop_all(s) == Ids{21});
    CHECK(complete(s, 21) == Ids{22});
}

TEST_CASE("a chain of writes over one view runs one task at a time", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 1, {inout(whole())}));
    for (TaskId id = 2; id <= 50; ++id) {
        CHECK_FALSE(add(s, id, {inout(whole())}));
        CHECK(s.waiting_for(id) == 1U);
    }
    for (TaskId id = 1; id <= 50; ++id) {
        CHECK(pop_all(s) == Ids{id});
        CHECK(complete(s, id) == (id < 50 ? Ids{id + 1} : Ids{}));
    }
    CHECK(s.unfinished() == 0);
}

TEST_CASE("a failed task fails its dependents transitively with the failed task named", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 12, {out(whole(VEC))}, "init"));
    CHECK_FALSE(add(s, 13, {inout(whole(VEC))}, "scale"));
    CHECK_FALSE(add(s, 14, {in(whole(VEC)), out(whole(OTHER))}, "reduce"));
    CHECK_FALSE(add(s, 15, {in(whole(OTHER))}, "report"));
    CHECK(add(s, 16, {out(whole(MATRIX))}, "unrelated"));
    CHECK(pop_all(s) == Ids{12, 16});
    const std::vector<FailedTask> failed = fail(s, 12);
    const std::string message = "dependency 'init' (task 12) failed: KERNEL_FAILED";
    REQUIRE(failed.size() == 3);
    CHECK(failed[0] == FailedTask{13, message});
    CHECK(failed[1] == FailedTask{14, message});
    CHECK(failed[2] == FailedTask{15, message});
    CHECK(s.unfinished() == 1);
    CHECK(s.state(13) == std::nullopt);
    // The failed tasks no longer order anything.
    CHECK(add(s, 17, {inout(whole(VEC)), inout(whole(OTHER))}));
}

TEST_CASE("failing a waiting task cancels it and its dependents but not its dependencies", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 1, {out(whole())}, "producer"));
    CHECK_FALSE(add(s, 2, {inout(whole())}, "middle"));
    CHECK_FALSE(add(s, 3, {in(whole())}, "consumer"));
    const std::vector<FailedTask> failed = fail(s, 2, ErrorCode::TIMEOUT);
    REQUIRE(failed.size() == 1);
    CHECK(failed[0] == FailedTask{3, "dependency 'middle' (task 2) failed: TIMEOUT"});
    CHECK(pop_all(s) == Ids{1});
    CHECK(complete(s, 1).empty());
    CHECK(s.unfinished() == 0);
}

TEST_CASE("a tolerant task waits for a failed dependency to finish and stops the failure", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 1, {out(whole(VEC))}, "init"));
    CHECK(add(s, 2, {out(whole(OTHER))}, "other"));
    CHECK(pop_all(s) == Ids{1, 2});
    // A tolerant write over both buffers (a client's write), then a reader of VEC behind it.
    const std::vector<TensorArg> both = {out(whole(VEC)), out(whole(OTHER))};
    CHECK_FALSE(s.add(3, "write", both, NO_LANE, true));
    CHECK_FALSE(add(s, 4, {in(whole(VEC))}, "reader"));
    CHECK(s.waiting_for(3) == 2U);
    // init fails: the tolerant write is not failed and waits for `other` alone; the reader waits for it.
    CHECK(fail(s, 1).empty());
    CHECK(s.state(3) == TaskState::WAITING);
    CHECK(s.waiting_for(3) == 1U);
    CHECK(s.state(4) == TaskState::WAITING);
    // `other` fails too: the write is READY, handed out and completed, and the reader runs after it.
    CHECK(fail(s, 2).empty());
    CHECK(s.state(3) == TaskState::READY);
    CHECK(pop_all(s) == Ids{3});
    CHECK(complete(s, 3) == Ids{4});
    CHECK(pop_all(s) == Ids{4});
    CHECK(complete(s, 4).empty());
    CHECK(s.unfinished() == 0);
}

TEST_CASE("a tolerant task released by a failed covering writer still waits for the task it covered", "[scheduler]") {
    Scheduler s;
    // `hold` runs over VEC; `doomed` writes all of it behind it, covering hold's access, so the tolerant write
    // added next is linked to doomed alone.
    CHECK(add(s, 1, {inout(whole(VEC))}, "hold"));
    CHECK(pop_all(s) == Ids{1});
    CHECK_FALSE(add(s, 2, {inout(whole(VEC))}, "doomed"));
    const std::vector<TensorArg> w = {out(make_tensor(VEC, DataType::FLOAT32, {4}, {}, 0))};
    CHECK_FALSE(s.add(3, "write", w, NO_LANE, true));
    CHECK(s.waiting_for(3) == 1U);
    // doomed is cancelled: the write is not failed, and it still waits for hold, which doomed stood for.
    CHECK(fail(s, 2, ErrorCode::CANCELLED).empty());
    CHECK(s.state(3) == TaskState::WAITING);
    CHECK(s.waiting_for(3) == 1U);
    CHECK(pop_all(s).empty());
    CHECK(complete(s, 1) == Ids{3});
    CHECK(pop_all(s) == Ids{3});
    CHECK(complete(s, 3).empty());
    CHECK(s.unfinished() == 0);
}

TEST_CASE("tolerant tasks behind a failed chain of covering writers wait for the first writer, and not twice",
          "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 1, {inout(whole(VEC))}, "hold"));
    CHECK(pop_all(s) == Ids{1});
    CHECK_FALSE(add(s, 2, {inout(whole(VEC))}, "first"));
    CHECK_FALSE(add(s, 3, {inout(whole(VEC))}, "second"));
    const std::vector<TensorArg> read = {in(whole(VEC))};
    const std::vector<TensorArg> release = {out(whole(VEC))};
    CHECK_FALSE(s.add(4, "read", read, NO_LANE, true));
    CHECK_FALSE(s.add(5, "release", release, NO_LANE, true));
    // first fails, and second with it; the read and the release wait for hold, the release for the read too.
    const std::vector<FailedTask> failed = fail(s, 2);
    REQUIRE(failed.size() == 1);
    CHECK(failed[0].first == 3);
    CHECK(s.waiting_for(4) == 1U);
    CHECK(s.waiting_for(5) == 2U);
    CHECK(pop_all(s).empty());
    // hold fails too: as finished for the tolerant tasks as a completion.
    CHECK(fail(s, 1).empty());
    CHECK(pop_all(s) == Ids{4});
    CHECK(complete(s, 4) == Ids{5});
    CHECK(pop_all(s) == Ids{5});
    CHECK(complete(s, 5).empty());
    CHECK(s.unfinished() == 0);
}

TEST_CASE("a failed tolerant task fails its dependents like any task", "[scheduler]") {
    Scheduler s;
    const std::vector<TensorArg> w = {out(whole(VEC))};
    CHECK(s.add(1, "write", w, NO_LANE, true));
    CHECK_FALSE(add(s, 2, {in(whole(VEC))}, "reader"));
    CHECK(pop_all(s) == Ids{1});
    const std::vector<FailedTask> failed = fail(s, 1);
    REQUIRE(failed.size() == 1);
    CHECK(failed[0] == FailedTask{2, "dependency 'write' (task 1) failed: KERNEL_FAILED"});
    CHECK(s.unfinished() == 0);
}

TEST_CASE("a failed covering writer puts back the access it covered", "[scheduler]") {
    Scheduler s;
    const Tensor part = make_tensor(VEC, DataType::FLOAT32, {8}, {}, 64);
    CHECK(add(s, 1, {out(part)}, "writer"));
    CHECK(pop_all(s) == Ids{1});
    CHECK_FALSE(add(s, 2, {out(whole())}, "cover"));
    CHECK(fail(s, 2).empty());
    // Task 1 still runs and still writes `part`: a reader of it must wait.
    CHECK_FALSE(add(s, 3, {in(part)}, "reader"));
    CHECK(complete(s, 1) == Ids{3});
}

TEST_CASE("a failed dependency of a covering writer does not hide the access it covered", "[scheduler]") {
    Scheduler s;
    const Tensor part = make_tensor(VEC, DataType::FLOAT32, {8}, {}, 64);
    CHECK(add(s, 1, {out(part)}, "writer"));
    CHECK(add(s, 2, {out(whole(OTHER))}, "other"));
    CHECK(pop_all(s) == Ids{1, 2});
    CHECK_FALSE(add(s, 3, {in(whole(OTHER)), out(whole())}, "cover"));
    CHECK(fail(s, 2).size() == 1);
    CHECK_FALSE(add(s, 4, {in(part)}, "reader"));
    CHECK(complete(s, 1) == Ids{4});
}

TEST_CASE("completing an unknown or finished task is refused without changing anything", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 1, {out(whole())}));
    CHECK_FALSE(add(s, 2, {in(whole())}));
    std::vector<TaskId> now_ready;
    CHECK_THROWS_MATCHES(s.complete(99, now_ready), std::logic_error,
                         Catch::Message("complete: task 99 is unknown or already finished"));
    CHECK(pop_all(s) == Ids{1});
    CHECK(complete(s, 1) == Ids{2});
    CHECK_THROWS_MATCHES(s.complete(1, now_ready), std::logic_error,
                         Catch::Message("complete: task 1 is unknown or already finished"));
    std::vector<FailedTask> failed;
    CHECK_THROWS_MATCHES(s.fail(1, ErrorCode::KERNEL_FAILED, failed), std::logic_error,
                         Catch::Message("fail: task 1 is unknown or already finished"));
    CHECK(now_ready.empty());
    CHECK(failed.empty());
    CHECK(s.unfinished() == 1);
    CHECK(pop_all(s) == Ids{2});
    CHECK(complete(s, 2).empty());
}

TEST_CASE("completing a task that is not running is refused", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 1, {out(whole())}));
    CHECK_FALSE(add(s, 2, {in(whole())}));
    std::vector<TaskId> now_ready;
    CHECK_THROWS_MATCHES(s.complete(1, now_ready), std::logic_error,
                         Catch::Message("complete: task 1 is queued, not running"));
    CHECK_THROWS_MATCHES(s.complete(2, now_ready), std::logic_error,
                         Catch::Message("complete: task 2 is queued, not running"));
    CHECK(s.state(1) == TaskState::READY);
    CHECK(s.state(2) == TaskState::WAITING);
    CHECK(pop_all(s) == Ids{1});
    CHECK(complete(s, 1) == Ids{2});
}

TEST_CASE("adding a task id twice is refused and keeps the first task", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 7, {out(whole())}));
    CHECK_THROWS_MATCHES(add(s, 7, {in(whole())}), std::logic_error, Catch::Message("task 7 is already scheduled"));
    CHECK(s.unfinished() == 1);
    CHECK(s.state(7) == TaskState::READY);
    CHECK(add(s, 8, {in(whole(OTHER))}));
}

TEST_CASE("adding a task with an invalid tag is refused", "[scheduler]") {
    Scheduler s;
    const TensorArg bad{whole(), static_cast<TensorTag>(9)};
    CHECK_THROWS_MATCHES(add(s, 1, {in(whole(OTHER)), bad}), std::logic_error,
                         Catch::Message("add: task 1 args[1] has tag 9, not input, output or inout"));
    CHECK(s.unfinished() == 0);
    CHECK(s.state(1) == std::nullopt);
}

TEST_CASE("a failed ready task is never handed out", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 1, {out(whole())}));
    CHECK(add(s, 2, {out(whole(OTHER))}));
    CHECK(fail(s, 1, ErrorCode::WORKER_DIED).empty());
    CHECK(pop_all(s) == Ids{2});
}

TEST_CASE("a task without tensor arguments is ready at once", "[scheduler]") {
    Scheduler s;
    CHECK(add(s, 1, {out(whole())}));
    CHECK(add(s, 2, {}));
    CHECK(pop_all(s) == Ids{1, 2});
}

TEST_CASE("task states are spelled as in TASKSTATE", "[scheduler]") {
    CHECK(std::string(to_string(TaskState::WAITING)) == "queued");
    CHECK(std::string(to_string(TaskState::READY)) == "queued");
    CHECK(std::string(to_string(TaskState::RUNNING)) == "running");
    CHECK(std::string(to_string(TaskState::COMPLETED)) == "completed");
    CHECK(std::string(to_string(TaskState::FAILED)) == "failed");
}
