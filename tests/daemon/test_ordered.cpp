// Tasks ordered after others on their worker (TaskRequest::after): a worker runs a frame only if the tasks it
// names succeeded; the supervisor fails a queued task whose predecessor failed, one submitted after that failure,
// and lets a frame name only the predecessors still in the mailbox.
#include "fixture.h"
#include "tests/task_results.h"

#include <catch2/catch.hpp>

using namespace canopy;
using namespace canopy::testing;
using daemon::Supervisor;
using daemon::TaskResult;

namespace {

daemon::TaskRequest ordered(daemon::TaskRequest r, std::vector<std::uint64_t> after, std::uint64_t id) {
    r.id = id;
    r.after = std::move(after);
    r.keep_failure = true;
    return r;
}

daemon::TaskRequest sleep_task(const std::string& worker, std::int64_t ms, std::uint64_t id) {
    auto r = task("sleep_ms", worker, {}, {ScalarArg::i64(ms)});
    r.id = id;
    r.keep_failure = true;
    return r;
}

} // namespace

TEST_CASE("a frame in flight behind a failed frame fails DEPENDENCY_FAILED on the worker", "[daemon][ordered]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 1, 1));
    sup.start();
    for (const std::string worker : {"chip0", "sub0"}) {
        INFO(worker);
        const auto b = sup.create_buffer({64, Backend::POSIX_SHM, Access::READWRITE, "", {}});
        auto m = map_shm(b);
        TaskResults p;
        sup.submit(sleep_task(worker, 300, 2001), p.next());
        // A fill whose view the worker refuses (the buffer is released below before the worker reaches it) fails
        // on the worker; the task ordered after it sits in the mailbox behind it.
        const auto doomed = sup.create_buffer({64, Backend::POSIX_SHM, Access::READWRITE, "", {}});
        sup.submit(ordered(task("fill", worker, {arg(doomed, TensorTag::OUTPUT, DataType::FLOAT32, {16})},
                                {ScalarArg::f32(1)}),
                           {}, 2002),
                   p.next());
        sup.submit(
            ordered(task("fill", worker, {arg(b, TensorTag::OUTPUT, DataType::FLOAT32, {16})}, {ScalarArg::f32(7)}),
                    {2002}, 2003),
            p.next());
        sup.release_buffer(doomed.identity);
        CHECK(p.get(0).ok());
        const TaskResult bad = p.get(1);
        REQUIRE_FALSE(bad.ok());
        const TaskResult dependent = p.get(2);
        CHECK(dependent.code == ErrorCode::DEPENDENCY_FAILED);
        CHECK(dependent.message ==
              "dependency (task 2002, on the same worker) failed: " + std::string(error_code_name(bad.code)));
        CHECK(floats(m, 16) == std::vector<float>(16, 0.0f));
        sup.forget_failure(2002);
        sup.forget_failure(2003);
        sup.release_buffer(b.identity);
    }
}

TEST_CASE("a task submitted after its predecessor was refused fails at once, until the failure is forgotten",
          "[daemon][ordered]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 1, 0));
    sup.start();
    const auto b = sup.create_buffer({64, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    auto m = map_shm(b);
    auto refused = task("no_such_kernel", "chip0", {});
    refused.id = 3001;
    refused.keep_failure = true;
    CHECK(sup.run(refused).code == ErrorCode::UNKNOWN_KERNEL);
    const auto fill = [&](std::uint64_t id) {
        return ordered(task("fill", "chip0", {arg(b, TensorTag::OUTPUT, DataType::FLOAT32, {16})}, {ScalarArg::f32(5)}),
                       {3001}, id);
    };
    const TaskResult dependent = sup.run(fill(3002));
    CHECK(dependent.code == ErrorCode::DEPENDENCY_FAILED);
    CHECK(dependent.message == "dependency (task 3001, on the same worker) failed: UNKNOWN_KERNEL");
    CHECK(dependent.start_ns == 0);
    CHECK(floats(m, 16) == std::vector<float>(16, 0.0f));
    // Once forgotten, a predecessor that is not in the mailbox is one that succeeded.
    sup.forget_failure(3001);
    sup.forget_failure(3002);
    CHECK(sup.run(fill(3003)).ok());
    CHECK(floats(m, 16) == std::vector<float>(16, 5.0f));
}

TEST_CASE("a queued task ordered after one that dies with its worker never reaches the restarted worker",
          "[daemon][ordered]") {
    TempDir state;
    auto options = l3_options(state.path, 1, 0);
    options.fault_kernels = true;
    Supervisor sup(options);
    sup.start();
    const auto b = sup.create_buffer({64, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    auto m = map_shm(b);
    TaskResults p;
    // The first frame aborts the worker; the frames behind it fill the mailbox and never run, so nothing is taken
    // off it before the worker dies, and the fill stays in the supervisor's queue (or arrives after the death).
    auto abort_task = task("abort", "chip0", {});
    abort_task.id = 4100;
    abort_task.keep_failure = true;
    sup.submit(abort_task, p.next());
    for (std::uint64_t i = 1; i < MAILBOX_FRAMES; ++i) {
        sup.submit(sleep_task("chip0", 0, 4000 + i), p.next());
    }
    sup.submit(ordered(task("fill", "chip0", {arg(b, TensorTag::OUTPUT, DataType::FLOAT32, {16})}, {ScalarArg::f32(9)}),
                       {4100}, 4101),
               p.next());
    const std::size_t last = p.futures.size() - 1;
    CHECK(p.get(0).code == ErrorCode::WORKER_DIED);
    const TaskResult dependent = p.get(last);
    CHECK(dependent.code == ErrorCode::DEPENDENCY_FAILED);
    CHECK(dependent.message == "dependency (task 4100, on the same worker) failed: WORKER_DIED");
    // The restarted worker runs the next task, and the fill never ran.
    CHECK(sup.run(task("sleep_ms", "chip0", {}, {ScalarArg::i64(0)})).ok());
    CHECK(floats(m, 16) == std::vector<float>(16, 0.0f));
}

TEST_CASE("a task ordered after more tasks than a frame names waits for enough of them, then runs",
          "[daemon][ordered]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 1, 0));
    sup.start();
    constexpr std::uint32_t PARTS = MAX_FRAME_AFTER + 3;
    const auto b = sup.create_buffer({PARTS * 4, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    const auto out = sup.create_buffer({4, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    auto m = map_shm(out);
    TaskResults p;
    sup.submit(sleep_task("chip0", 200, 5000), p.next());
    std::vector<std::uint64_t> parts;
    for (std::uint32_t i = 0; i < PARTS; ++i) {
        sup.submit(ordered(task("fill", "chip0", {arg(b, TensorTag::OUTPUT, DataType::FLOAT32, {1}, {1}, i * 4)},
                                {ScalarArg::f32(static_cast<float>(i + 1))}),
                           {}, 5001 + i),
                   p.next());
        parts.push_back(5001 + i);
    }
    sup.submit(ordered(task("reduce_sum", "chip0",
                            {arg(b, TensorTag::INPUT, DataType::FLOAT32, {PARTS}),
                             arg(out, TensorTag::OUTPUT, DataType::FLOAT32, {1})}),
                       parts, 5100),
               p.next());
    for (std::size_t i = 0; i < p.futures.size(); ++i) {
        INFO("task " << i);
        CHECK(p.get(i).ok());
    }
    CHECK(floats(m, 1) == std::vector<float>{PARTS * (PARTS + 1) / 2.0f});
}

TEST_CASE("a task for a worker below a nested node cannot be ordered after others", "[daemon][ordered]") {
    TempDir state;
    Supervisor sup(l4_options(state.path, 1, 0));
    sup.start();
    CHECK(sup.lane("node0/chip0") == 0U);
    CHECK(sup.lane("node0") == 0U);
    CHECK(sup.lane("nosuch") == 0U);
    auto r = ordered(task("sleep_ms", "node0/chip0", {}, {ScalarArg::i64(0)}), {1}, 6001);
    const TaskResult result = sup.run(r);
    CHECK(result.code == ErrorCode::BAD_REQUEST);
    CHECK(result.message == "a task for node0/chip0 (below a nested or remote node) cannot be ordered after others");
}

TEST_CASE("each cuda chip of a supervisor is a lane of its own, and other workers have none", "[daemon][ordered]") {
    TempDir state;
    auto options = l3_options(state.path, 1, 1);
    options.children.push_back({"chip1", daemon::ChildKind::CUDA_CHIP, 0, {}, {}});
    options.children.push_back({"chip2", daemon::ChildKind::CUDA_CHIP, 1, {}, {}});
    Supervisor sup(options); // not started: the lanes come from the topology alone
    const std::uint32_t first = sup.lane("chip1");
    const std::uint32_t second = sup.lane("/chip2");
    CHECK(first != 0U);
    CHECK(second != 0U);
    CHECK(first != second);
    CHECK(sup.lane("/chip1") == first);
    CHECK(sup.lane("chip0") == 0U);
    CHECK(sup.lane("sub0") == 0U);
}
