// Scheduler lanes: an edge between two tasks of one lane is ordered by the lane once the earlier task is handed
// out, so a chain on one worker is handed out at once; edges across lanes, and tasks without a lane, still
// wait for completion; failures fail what is not yet handed out and leave the rest to the worker.

#include "tests/scheduler/support.h"

#include <algorithm>
#include <map>
#include <random>

using namespace canopy;
using namespace canopy::scheduler;
using namespace canopy::test;

namespace {

constexpr Lane CHIP0 = 1;
constexpr Lane CHIP1 = 2;

Ids after(Scheduler& s, TaskId id) {
    Ids out;
    s.ordered_after(id, out);
    return out;
}

// Fails `id` with `code`; the ids of the tasks failed with it.
Ids failed_ids(Scheduler& s, TaskId id, ErrorCode code = ErrorCode::KERNEL_FAILED) {
    Ids ids;
    for (const auto& [dependent, message] : fail(s, id, code)) {
        ids.push_back(dependent);
    }
    return ids;
}

} // namespace

TEST_CASE("a chain of writes on one lane is handed out at once, each after its predecessor", "[scheduler][lanes]") {
    Scheduler s;
    for (TaskId id = 1; id <= 100; ++id) {
        s.add(id, "t", std::vector<TensorArg>{inout(whole())}, CHIP0);
    }
    Ids expected(100);
    for (TaskId id = 1; id <= 100; ++id) {
        expected[id - 1] = id;
    }
    CHECK(pop_all(s) == expected);
    CHECK(after(s, 1).empty());
    for (TaskId id = 2; id <= 100; ++id) {
        CHECK(after(s, id) == Ids{id - 1});
        CHECK(s.state(id) == TaskState::RUNNING);
        CHECK(s.waiting_for(id) == 0U);
    }
    for (TaskId id = 1; id <= 100; ++id) {
        CHECK(complete(s, id).empty());
    }
    CHECK(s.unfinished() == 0U);
}

TEST_CASE("a task added after its predecessor was handed out on its lane is ready at once", "[scheduler][lanes]") {
    Scheduler s;
    CHECK(s.add(1, "init", std::vector<TensorArg>{out(whole())}, CHIP0));
    CHECK(pop_all(s) == Ids{1});
    CHECK(s.add(2, "use", std::vector<TensorArg>{in(whole())}, CHIP0));
    CHECK(after(s, 2) == Ids{1});
    CHECK(pop_all(s) == Ids{2});
}

TEST_CASE("an edge across lanes waits for the predecessor to complete", "[scheduler][lanes]") {
    Scheduler s;
    s.add(1, "init", std::vector<TensorArg>{out(whole())}, CHIP0);
    CHECK_FALSE(s.add(2, "use", std::vector<TensorArg>{in(whole())}, CHIP1));
    CHECK(pop_all(s) == Ids{1});
    CHECK(s.state(2) == TaskState::WAITING);
    CHECK(s.waiting_for(2) == 1U);
    CHECK(complete(s, 1) == Ids{2});
    CHECK(pop_all(s) == Ids{2});
    CHECK(after(s, 2).empty());
}

TEST_CASE("tasks without a lane wait for completion even on one worker", "[scheduler][lanes]") {
    Scheduler s;
    s.add(1, "init", std::vector<TensorArg>{out(whole())}, NO_LANE);
    CHECK_FALSE(s.add(2, "use", std::vector<TensorArg>{in(whole())}, NO_LANE));
    CHECK(pop_all(s) == Ids{1});
    CHECK(s.state(2) == TaskState::WAITING);
    CHECK(complete(s, 1) == Ids{2});

    // A lane task after a task without one waits too: nothing orders the two.
    s.add(3, "init", std::vector<TensorArg>{out(whole(OTHER))}, NO_LANE);
    CHECK_FALSE(s.add(4, "use", std::vector<TensorArg>{in(whole(OTHER))}, CHIP0));
    CHECK(pop_all(s) == Ids{2, 3});
    CHECK(s.state(4) == TaskState::WAITING);
    CHECK(complete(s, 3) == Ids{4});
}

TEST_CASE("a task with predecessors on two lanes waits for the one on the other lane", "[scheduler][lanes]") {
    Scheduler s;
    s.add(1, "a", std::vector<TensorArg>{out(whole())}, CHIP0);
    s.add(2, "b", std::vector<TensorArg>{out(whole(OTHER))}, CHIP1);
    CHECK_FALSE(s.add(3, "sum", std::vector<TensorArg>{in(whole()), inout(whole(OTHER))}, CHIP0));
    CHECK(pop_all(s) == Ids{1, 2});
    CHECK(s.state(3) == TaskState::WAITING);
    CHECK(s.waiting_for(3) == 1U); // task 1 is ordered by chip0's lane; task 2 is not
    CHECK(after(s, 3) == Ids{1});
    CHECK(complete(s, 2) == Ids{3});
    CHECK(pop_all(s) == Ids{3});
}

TEST_CASE("a dependent waits while its predecessor on its lane is still waiting", "[scheduler][lanes]") {
    Scheduler s;
    s.add(1, "far", std::vector<TensorArg>{out(whole(OTHER))}, CHIP1);
    s.add(2, "copy", std::vector<TensorArg>{in(whole(OTHER)), out(whole())}, CHIP0);
    s.add(3, "scale", std::vector<TensorArg>{inout(whole())}, CHIP0);
    CHECK(pop_all(s) == Ids{1});
    CHECK(s.state(2) == TaskState::WAITING);
    CHECK(s.state(3) == TaskState::WAITING);
    CHECK(complete(s, 1) == Ids{2});
    // Handing out 2 orders 3 behind it.
    CHECK(pop_all(s) == Ids{2, 3});
    CHECK(after(s, 3) == Ids{2});
}

TEST_CASE("a failure before hand-out fails the waiting and ready dependents on its lane", "[scheduler][lanes]") {
    Scheduler s;
    s.add(1, "blocker", std::vector<TensorArg>{out(whole(OTHER))}, CHIP1);
    s.add(2, "p", std::vector<TensorArg>{in(whole(OTHER)), out(whole())}, CHIP0);
    s.add(3, "d1", std::vector<TensorArg>{inout(whole())}, CHIP0);
    s.add(4, "d2", std::vector<TensorArg>{inout(whole())}, CHIP0);
    CHECK(pop_all(s) == Ids{1});
    // 2 fails before it is handed out (its predecessor failed): 3 and 4 never reach the worker.
    CHECK(failed_ids(s, 1) == Ids{2, 3, 4});
    CHECK(s.unfinished() == 0U);
    CHECK(pop_all(s).empty());
}

TEST_CASE("a failure after hand-out leaves running dependents to the worker and fails the rest", "[scheduler][lanes]") {
    Scheduler s;
    s.add(1, "p", std::vector<TensorArg>{out(whole())}, CHIP0);
    s.add(2, "d", std::vector<TensorArg>{inout(whole())}, CHIP0);
    CHECK(pop_all(s) == Ids{1, 2});
    // Added after both were handed out: 3 is ordered behind 2 (on chip0), 4 waits for 2 (on chip1).
    CHECK(s.add(3, "e", std::vector<TensorArg>{inout(whole())}, CHIP0));
    CHECK_FALSE(s.add(4, "f", std::vector<TensorArg>{in(whole())}, CHIP1));
    CHECK(s.state(3) == TaskState::READY);
    // 1 fails on the worker: 2 is with the worker, which fails it itself; nothing waits on 1 directly.
    CHECK(failed_ids(s, 1).empty());
    CHECK(s.state(2) == TaskState::RUNNING);
    // The worker reports 2 failed: the ready 3 and the waiting 4 fail with it.
    CHECK(failed_ids(s, 2, ErrorCode::DEPENDENCY_FAILED) == Ids{3, 4});
    CHECK(s.unfinished() == 0U);
    CHECK(pop_all(s).empty());
}

TEST_CASE("completing a predecessor of a running dependent on its lane changes nothing for it", "[scheduler][lanes]") {
    Scheduler s;
    s.add(1, "p", std::vector<TensorArg>{out(whole())}, CHIP0);
    s.add(2, "d", std::vector<TensorArg>{inout(whole())}, CHIP0);
    s.add(3, "far", std::vector<TensorArg>{in(whole())}, CHIP1);
    CHECK(pop_all(s) == Ids{1, 2});
    CHECK(complete(s, 1).empty()); // 3 reads what 2 writes: it still waits for 2
    CHECK(s.state(3) == TaskState::WAITING);
    CHECK(complete(s, 2) == Ids{3});
}

TEST_CASE("ordered_after refuses an unknown task", "[scheduler][lanes]") {
    Scheduler s;
    Ids out;
    CHECK_THROWS_AS(s.ordered_after(7, out), std::logic_error);
}

// Random graphs over two lanes and tasks without one, handed out, completed and failed in random order, except
// that a lane finishes its tasks in the order it was handed them and fails a task ordered after a failed one, as
// a worker does. When a task is handed out, every earlier unfinished task that conflicts with it must be running
// on its own lane, handed out before it; and every task named by ordered_after must be on that lane.
TEST_CASE("random graphs on lanes never hand out a task before an unordered conflicting one", "[scheduler][lanes]") {
    for (std::uint64_t seed = 1; seed <= 40; ++seed) {
        std::mt19937_64 rng(seed);
        auto below = [&](std::uint64_t n) { return static_cast<std::uint32_t>(rng() % n); };
        Scheduler s;
        struct Model {
            std::vector<TensorArg> args;
            Lane lane;
            bool running = false;
            bool finished = false;
            bool failed = false;
            std::uint64_t handed = 0;
            Ids ordered;
        };
        std::map<TaskId, Model> model;
        std::uint64_t clock = 0;
        TaskId next = 1;
        const BufferDescriptor buffers[2] = {VEC, OTHER};
        auto conflict = [](const Model& a, const Model& b) {
            for (const TensorArg& x : a.args) {
                for (const TensorArg& y : b.args) {
                    if ((tag_writes(x.tag) || tag_writes(y.tag)) &&
                        tensor_overlap(x.tensor, y.tensor) != Overlap::NONE) {
                        return true;
                    }
                }
            }
            return false;
        };
        // A running task that may finish now: any task without a lane, or the oldest running one of its lane.
        auto finishable = [&](TaskId id) {
            const Model& m = model.at(id);
            if (m.lane == NO_LANE) {
                return true;
            }
            for (const auto& [other_id, other] : model) {
                if (other.lane == m.lane && other.running && !other.finished && other.handed < m.handed) {
                    return false;
                }
            }
            return true;
        };
        for (int step = 0; step < 400; ++step) {
            const std::uint32_t op = below(10);
            if (op < 4 && next < 120) {
                Model m;
                const std::uint32_t lane_pick = below(3);
                m.lane = lane_pick == 0 ? NO_LANE : (lane_pick == 1 ? CHIP0 : CHIP1);
                const std::uint32_t start = below(4) * 256;
                const Tensor t = make_tensor(buffers[below(2)], DataType::FLOAT32, {256}, {1}, start * 4);
                m.args.push_back({t, static_cast<TensorTag>(1 + below(3))});
                s.add(next, "t", m.args, m.lane);
                model.emplace(next++, m);
            } else if (op < 7) {
                if (const auto id = s.pop_ready()) {
                    Model& t = model.at(*id);
                    for (const auto& [other_id, other] : model) {
                        if (other_id >= *id || other.finished || !conflict(other, t)) {
                            continue;
                        }
                        INFO("seed " << seed << ": task " << *id << " handed out before task " << other_id);
                        REQUIRE(other.running);
                        REQUIRE(t.lane != NO_LANE);
                        REQUIRE(other.lane == t.lane);
                    }
                    s.ordered_after(*id, t.ordered);
                    for (const TaskId p : t.ordered) {
                        REQUIRE(model.at(p).lane == t.lane);
                        REQUIRE(model.at(p).handed != 0);
                    }
                    t.running = true;
                    t.handed = ++clock;
                }
            } else {
                std::vector<TaskId> candidates;
                for (const auto& [id, m] : model) {
                    if (m.running && !m.finished && finishable(id)) {
                        candidates.push_back(id);
                    }
                }
                if (candidates.empty()) {
                    continue;
                }
                const TaskId id = candidates[below(candidates.size())];
                Model& m = model.at(id);
                const bool doomed =
                    std::any_of(m.ordered.begin(), m.ordered.end(), [&](TaskId p) { return model.at(p).failed; });
                m.finished = true;
                if (op < 9 && !doomed) {
                    Ids now_ready;
                    s.complete(id, now_ready);
                } else {
                    m.failed = true;
                    std::vector<FailedTask> failed;
                    s.fail(id, doomed ? ErrorCode::DEPENDENCY_FAILED : ErrorCode::KERNEL_FAILED, failed);
                    for (const auto& [dependent, message] : failed) {
                        REQUIRE_FALSE(model.at(dependent).running);
                        model.at(dependent).finished = true;
                        model.at(dependent).failed = true;
                    }
                }
            }
        }
    }
}
