// Tasks through the C++ client library against a real daemon: submit and run with their futures, the waiting
// calls, cancel and tasks, and task failures as TaskError.
#include "client/canopy_client.h"
#include "tests/service/fixture.h"
#include "tests/service/helpers.h"

#include <catch2/catch.hpp>
#include <future>
#include <thread>

using namespace canopy;
using namespace canopy::client;
using canopy::e2e::Daemon;
using canopy::e2e::e2e_config;

namespace {

Task sleep_ms(std::int64_t ms, const std::string& on = "sub0") {
    return Task("sleep_ms", on).scalar(Scalar::int64(ms));
}

} // namespace

TEST_CASE("submit returns a future that waits over its own connection while the Connection serves on",
          "[client][tasks]") {
    Daemon d(e2e_config(0, 1));
    Connection c = Connection::connect(d.socket());
    TaskFuture f = c.submit(sleep_ms(300).name("nap"));
    CHECK(f.id() > 0);
    CHECK(f.state().name == "nap");
    CHECK_FALSE(f.state().finished());
    CHECK_FALSE(f.ready());
    CHECK(f.wait_for(std::chrono::milliseconds(20)) == std::nullopt);
    // The submitting connection is free meanwhile.
    CHECK(c.status().all_running());
    const TaskState& done = f.get();
    CHECK(done.status == TaskStatus::COMPLETED);
    CHECK(done.end_ns >= done.start_ns);
    CHECK(f.ready());
    // submit_wait replies when the task has finished.
    const TaskState waited = c.submit_wait(sleep_ms(0));
    CHECK(waited.status == TaskStatus::COMPLETED);
    // A future outlives the Connection that made it.
    std::optional<TaskFuture> orphan;
    {
        Connection gone = Connection::connect(d.socket());
        orphan.emplace(gone.submit(sleep_ms(50)));
    }
    CHECK(orphan->get().status == TaskStatus::COMPLETED);
}

TEST_CASE("a failed task is a state for wait and a TaskError for get", "[client][tasks]") {
    Daemon d(e2e_config(0, 1));
    Connection c = Connection::connect(d.socket());
    TaskFuture f = c.submit(Task("abort", "sub0").name("boom"));
    const TaskState& failed = f.wait();
    CHECK(failed.status == TaskStatus::FAILED);
    CHECK(failed.error_code == ErrorCode::WORKER_DIED);
    try {
        f.get();
        FAIL("no TaskError");
    } catch (const TaskError& e) {
        CHECK(e.code() == ErrorCode::WORKER_DIED);
        CHECK(e.task().name == "boom");
        CHECK_THAT(std::string(e.what()), Catch::StartsWith("task boom (id " + std::to_string(f.id()) + ") failed: "));
    }
    // A task the daemon refuses at submit is an Error, before any future exists.
    try {
        c.submit(Task("nope", "sub0"));
        FAIL("no Error");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::UNKNOWN_KERNEL);
    }
}

TEST_CASE("futures are waited on from several threads at once, each on its own connection", "[client][tasks]") {
    Daemon d(e2e_config(0, 2));
    Connection c = Connection::connect(d.socket());
    std::vector<TaskFuture> futures;
    for (int i = 0; i < 4; ++i) {
        futures.push_back(c.submit(sleep_ms(100 + 50 * i, i % 2 ? "sub1" : "sub0")));
    }
    std::vector<std::future<TaskStatus>> waits;
    for (auto& f : futures) {
        waits.push_back(std::async(std::launch::async, [&f] { return f.get().status; }));
    }
    for (auto& w : waits) {
        CHECK(w.get() == TaskStatus::COMPLETED);
    }
}

TEST_CASE("run returns a graph future and run_wait every task's final state, with progress", "[client][tasks]") {
    Daemon d(e2e_config(0, 1));
    Connection c = Connection::connect(d.socket());
    const BufferInfo b = c.create_buffer({.bytes = 4096});
    Graph g;
    g.add(Task("fill", "sub0").name("fill").output(View(b.id, "float32", {1024})).scalar(Scalar::float32(3.0f)))
        .add(Task("scale", "sub0").name("scale").inout(View(b.id, "float32", {1024})).scalar(Scalar::float32(2.0f)));
    GraphFuture f = c.run(g);
    REQUIRE(f.states().size() == 2);
    const auto& done = f.get();
    CHECK(done[0].name == "fill");
    CHECK(done[1].status == TaskStatus::COMPLETED);
    const auto value = c.read(b.id, 0, std::uint64_t{4});
    float v = 0;
    std::memcpy(&v, value.data(), 4);
    CHECK(v == 6.0f);

    Graph slow;
    for (int i = 0; i < 3; ++i) {
        slow.add(sleep_ms(200).name("s" + std::to_string(i)));
    }
    std::vector<nlohmann::json> progress;
    const auto states = c.run_wait(slow, [&](const nlohmann::json& p) { progress.push_back(p); });
    REQUIRE(states.size() == 3);
    CHECK(std::all_of(states.begin(), states.end(),
                      [](const TaskState& t) { return t.status == TaskStatus::COMPLETED; }));
    REQUIRE_FALSE(progress.empty());
    CHECK(progress.back().at("total") == 3);

    // A rejected graph runs nothing: get() names the task rejected on its own.
    Graph bad;
    bad.add(sleep_ms(0).name("fine")).add(Task("nope", "sub0").name("bad"));
    GraphFuture rejected = c.run(bad);
    try {
        rejected.get();
        FAIL("no TaskError");
    } catch (const TaskError& e) {
        CHECK(e.task().name == "bad");
        CHECK(e.code() == ErrorCode::UNKNOWN_KERNEL);
    }
    CHECK(rejected.states()[0].status == TaskStatus::REJECTED);
}

TEST_CASE("wait times out, cancel stops queued tasks, tasks lists them", "[client][tasks]") {
    Daemon d(e2e_config(0, 1));
    Connection c = Connection::connect(d.socket());
    // The second task writes what the first one writes, so it stays queued behind it.
    const BufferInfo b = c.create_buffer({.bytes = 64});
    const View both(b.id, "float32", {16});
    TaskFuture running = c.submit(Task("sleep_ms", "sub0").name("running").inout(both).scalar(Scalar::int64(500)));
    TaskFuture queued = c.submit(Task("sleep_ms", "sub0").name("queued").inout(both).scalar(Scalar::int64(500)));
    const WaitResult timed = c.wait({running.id(), queued.id()}, std::chrono::milliseconds(50));
    CHECK(timed.timed_out);
    REQUIRE(timed.tasks.size() == 2);
    CHECK_FALSE(timed.tasks[1].finished());
    canopy::e2e::wait_task_started(d, "running");
    const auto outcomes = c.cancel({queued.id(), running.id()});
    REQUIRE(outcomes.size() == 2);
    CHECK(outcomes[0].outcome == "cancelled");
    CHECK(outcomes[0].task.error_code == ErrorCode::CANCELLED);
    CHECK(outcomes[1].outcome == "running");
    CHECK(queued.wait().error_code == ErrorCode::CANCELLED);
    const WaitResult one = c.wait({running.id()});
    CHECK_FALSE(one.timed_out);
    CHECK(one.tasks.at(0).status == TaskStatus::COMPLETED);
    const auto listed = c.tasks();
    REQUIRE(listed.size() == 2);
    CHECK(listed[0].name == "running");
    CHECK(listed[1].status == TaskStatus::FAILED);
    try {
        c.wait({987654});
        FAIL("no Error");
    } catch (const Error& e) {
        CHECK(e.code() == ErrorCode::BAD_REQUEST);
        CHECK_THAT(std::string(e.what()), Catch::StartsWith("no task 987654"));
    }
}
