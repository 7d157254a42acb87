// The supervisor's lifecycle policy on a fake launcher and a fake clock: back-off, the restart budget, the
// healthy-uptime rule, revival, zygote replacement and task timeouts, each observed at the exact instant of the
// supervisor's clock where it must happen, with no child process and no waiting for real time to pass.
#include "fake_lifecycle.h"
#include "fixture.h"
#include "lifecycle_support.h"

#include <catch2/catch.hpp>
#include <future>
#include <signal.h>
#include <thread>

using namespace canopy;
using namespace canopy::testing;
using daemon::WorkerState;

namespace {

// One supervisor of one sub ("/sub0", slot 0) on a FakeLauncher and a FakeClock.
struct Harness {
    TempDir state;
    CapturedLog log;
    std::shared_ptr<FakeChildren> children = std::make_shared<FakeChildren>();
    std::shared_ptr<FakeClock> clock = std::make_shared<FakeClock>();
    std::unique_ptr<daemon::Supervisor> sup;
    std::atomic<int> fatal_calls{0};
    std::string fatal_why;

    // `slow_log_text`: a line containing it reaches `log` 300 ms late, as through a slow journal, and while it is
    // held back every thread waiting on the clock wakes and looks again at what it waits for.
    explicit Harness(std::uint32_t budget = 5, const std::string& slow_log_text = {})
        : log(slow_log_text, [this] {
              clock->advance(0ms);
              std::this_thread::sleep_for(300ms);
          }) {
        auto o = l3_options(state.path, 0, 1);
        o.restart_budget = budget;
        o.backoff_initial = 50ms;
        o.backoff_max = 200ms;
        o.drain_timeout = 0ms;
        o.log = log.logger;
        daemon::SupervisorSeams seams;
        seams.launcher = [c = children](daemon::ChildMain) { return std::make_unique<FakeLauncher>(c); };
        seams.clock = clock;
        sup = std::make_unique<daemon::Supervisor>(std::move(o), std::move(seams));
        sup->set_on_fatal([this](const std::string& why) {
            fatal_why = why;
            ++fatal_calls;
        });
        sup->start();
    }
    WorkerState state_of() const { return worker_status(*sup, "/sub0")->state; }
    bool becomes(WorkerState s) const {
        return eventually([&] { return state_of() == s; });
    }
    // The sub dies with `status`; returns once the supervisor sleeps until exactly `restart_at` (its clock).
    bool dies_and_waits(int status, std::chrono::milliseconds backoff) {
        const auto waits = clock->waits();
        const auto restart_at = clock->now() + backoff;
        children->exit(0, status);
        return clock->sleeps_until(restart_at, waits);
    }
};

} // namespace

TEST_CASE("a dead child restarts at exactly its back-off on the supervisor's clock, doubling up to the cap",
          "[daemon][lifecycle]") {
    Harness h;
    REQUIRE(h.children->spawns(0) == 1);
    std::size_t n = 1;
    for (const auto backoff : {50ms, 100ms, 200ms, 200ms}) {
        INFO("restart " << n << " after " << backoff.count() << " ms");
        const auto restart_at = h.clock->now() + backoff;
        REQUIRE(h.dies_and_waits(SIGKILL, backoff));
        CHECK(h.state_of() == WorkerState::RESTARTING);
        // One tick short: the housekeeping thread wakes, finds nothing due, and sleeps until the same instant.
        const auto waits = h.clock->waits();
        h.clock->advance(backoff - 1ms);
        REQUIRE(h.clock->sleeps_until(restart_at, waits));
        CHECK(h.children->spawns(0) == n);
        h.clock->advance(1ms);
        REQUIRE(h.children->spawned(0, ++n));
        REQUIRE(h.becomes(WorkerState::RUNNING));
    }
    CHECK(h.log.matching({"worker /sub0 (pid", "killed by signal 9 (SIGKILL); restart 1 in 50 ms"}).size() == 1);
    CHECK(h.log.matching({"restart 3 in 200 ms"}).size() == 1);
    CHECK(h.log.matching({"restart 4 in 200 ms"}).size() == 1);
    CHECK(worker_status(*h.sup, "/sub0")->restarts == 4);
}

TEST_CASE("a child that stayed up the healthy uptime starts its back-off over", "[daemon][lifecycle]") {
    Harness h;
    REQUIRE(h.dies_and_waits(SIGKILL, 50ms));
    h.clock->advance(50ms);
    REQUIRE(h.children->spawned(0, 2));
    REQUIRE(h.becomes(WorkerState::RUNNING));
    REQUIRE(h.dies_and_waits(SIGKILL, 100ms)); // a second failure in a row
    h.clock->advance(100ms);
    REQUIRE(h.children->spawned(0, 3));
    REQUIRE(h.becomes(WorkerState::RUNNING));
    h.clock->advance(30s);                    // up for the healthy uptime
    REQUIRE(h.dies_and_waits(SIGKILL, 50ms)); // the count starts over
    CHECK(h.log.matching({"restart 3 in 50 ms"}).size() == 1);
}

TEST_CASE("a child that fails past its budget is dead until worker restart revives it", "[daemon][lifecycle]") {
    Harness h(2);
    REQUIRE(h.dies_and_waits(3 << 8, 50ms)); // exit code 3
    h.clock->advance(50ms);
    REQUIRE(h.children->spawned(0, 2));
    REQUIRE(h.becomes(WorkerState::RUNNING));
    REQUIRE(h.dies_and_waits(3 << 8, 100ms));
    h.clock->advance(100ms);
    REQUIRE(h.children->spawned(0, 3));
    REQUIRE(h.becomes(WorkerState::RUNNING));
    h.children->exit(0, 3 << 8);
    REQUIRE(h.becomes(WorkerState::DEAD));
    CHECK(h.log
              .matching({"error worker /sub0 (pid", "exited with code 3; marked dead after 2 restarts",
                         "`canopy worker restart /sub0` revives it"})
              .size() == 1);
    // A task aimed at the dead worker fails at once, naming why.
    const auto r = h.sup->run(task("sleep_ms", "sub0", {}, {ScalarArg::i64(0)}));
    CHECK(r.code == ErrorCode::WORKER_DIED);
    CHECK_THAT(r.message, Catch::Contains("worker /sub0 is dead (last exit: exited with code 3)"));
    // Revival starts it now, on the clock as it stands, with a fresh budget.
    h.sup->restart_worker("/sub0");
    REQUIRE(h.children->spawned(0, 4));
    REQUIRE(h.becomes(WorkerState::RUNNING));
    CHECK(h.log.matching({"worker /sub0: revived, as asked"}).size() == 1);
    REQUIRE(h.dies_and_waits(3 << 8, 50ms));
}

TEST_CASE("a start the zygote could not fork is retried after the back-off", "[daemon][lifecycle]") {
    Harness h;
    REQUIRE(h.dies_and_waits(SIGKILL, 50ms));
    h.children->fail_next_spawn = EAGAIN;
    const auto waits = h.clock->waits();
    const auto retry_at = h.clock->now() + 50ms + 100ms;
    h.clock->advance(50ms);
    REQUIRE(h.children->spawned(0, 2));
    REQUIRE(h.clock->sleeps_until(retry_at, waits));
    CHECK(h.log.matching({"worker /sub0 fork failed: Resource temporarily unavailable; restart 2 in 100 ms"}).size() ==
          1);
    h.clock->advance(100ms);
    REQUIRE(h.children->spawned(0, 3));
    REQUIRE(h.becomes(WorkerState::RUNNING));
}

TEST_CASE("a zygote death restarts every child at the initial back-off without counting", "[daemon][lifecycle]") {
    Harness h;
    REQUIRE(h.dies_and_waits(SIGKILL, 50ms)); // one failure of the child's own
    h.clock->advance(50ms);
    REQUIRE(h.children->spawned(0, 2));
    REQUIRE(h.becomes(WorkerState::RUNNING));
    const pid_t old_zygote = h.children->zygote_pid();
    const auto waits = h.clock->waits();
    const auto restart_at = h.clock->now() + 50ms;
    h.children->kill_zygote();
    REQUIRE(h.clock->sleeps_until(restart_at, waits));
    CHECK(h.log
              .matching({"error /: the zygote (pid " + std::to_string(old_zygote) + ") killed by signal 9",
                         "takes its place and every child restarts"})
              .size() == 1);
    CHECK(
        h.log.matching({"died with the zygote (pid " + std::to_string(old_zygote) + "); restart 2 in 50 ms"}).size() ==
        1);
    h.clock->advance(50ms);
    REQUIRE(h.children->spawned(0, 3));
    REQUIRE(h.becomes(WorkerState::RUNNING));
    // The zygote's death did not count against the child: its own next failure is its second in a row.
    REQUIRE(h.dies_and_waits(SIGKILL, 100ms));
    CHECK(h.fatal_calls == 0);
}

TEST_CASE("a zygote that dies while a child's start is being asked of it ends that start only once it is set up",
          "[daemon][lifecycle]") {
    // The child's death line is slow to write, and the housekeeping thread looks for restarts while it is: the
    // restart the line announces must not be waited for before the line is in the log.
    Harness h(5, "died with the zygote");
    const pid_t old_zygote = h.children->zygote_pid();
    // The restart after the child's exit asks the zygote, which dies then: the event thread takes the death while
    // the supervisor's spawn has not yet finished setting up the incarnation it published.
    h.children->during_next_spawn_request = [&h] {
        h.children->kill_zygote();
        std::this_thread::sleep_for(200ms);
    };
    REQUIRE(h.dies_and_waits(SIGKILL, 50ms));
    const auto waits = h.clock->waits();
    h.clock->advance(50ms);
    REQUIRE(h.children->spawned(0, 2));
    // The start that went to the dead zygote ends with it, and its restart goes through the successor.
    REQUIRE(h.clock->sleeps_until(h.clock->now() + 50ms, waits));
    CHECK(h.log.matching({"died with the zygote (pid " + std::to_string(old_zygote) + ")"}).size() == 1);
    h.clock->advance(50ms);
    REQUIRE(h.children->spawned(0, 3));
    REQUIRE(h.becomes(WorkerState::RUNNING));
    CHECK(h.fatal_calls == 0);
}

TEST_CASE("zygotes dying faster than the healthy uptime past the budget end the tree", "[daemon][lifecycle]") {
    Harness h(2);
    for (int death = 1; death <= 2; ++death) {
        const auto waits = h.clock->waits();
        const auto restart_at = h.clock->now() + 50ms;
        h.children->kill_zygote();
        REQUIRE(h.clock->sleeps_until(restart_at, waits));
        h.clock->advance(50ms);
        REQUIRE(h.children->spawned(0, static_cast<std::size_t>(death) + 1));
        REQUIRE(h.becomes(WorkerState::RUNNING));
    }
    h.children->kill_zygote();
    REQUIRE(eventually([&] { return h.fatal_calls == 1; }));
    CHECK_THAT(h.fatal_why, Catch::Contains("zygotes died 3 times in a row, past the restart budget of 2"));
    REQUIRE(h.becomes(WorkerState::DEAD));
    CHECK(h.log.matching({"critical /: the zygote", "the tree cannot heal and every worker is dead"}).size() == 1);
}

TEST_CASE("zygote deaths a healthy uptime apart never exhaust the budget", "[daemon][lifecycle]") {
    Harness h(1);
    for (std::size_t death = 1; death <= 3; ++death) {
        h.clock->advance(30s);
        const auto waits = h.clock->waits();
        const auto restart_at = h.clock->now() + 50ms;
        h.children->kill_zygote();
        REQUIRE(h.clock->sleeps_until(restart_at, waits));
        h.clock->advance(50ms);
        REQUIRE(h.children->spawned(0, death + 1));
        REQUIRE(h.becomes(WorkerState::RUNNING));
    }
    CHECK(h.fatal_calls == 0);
}

TEST_CASE("a task past its timeout gets its worker killed at the deadline on the supervisor's clock",
          "[daemon][lifecycle]") {
    Harness h;
    auto req = task("sleep_ms", "sub0", {}, {ScalarArg::i64(60000)});
    req.timeout = 1000ms;
    std::promise<daemon::TaskResult> result;
    const auto waits = h.clock->waits();
    const auto deadline = h.clock->now() + 1000ms;
    const pid_t pid = h.children->pid(0);
    const std::uint64_t id = h.sup->submit(std::move(req), [&](daemon::TaskResult r) { result.set_value(r); });
    REQUIRE(h.clock->sleeps_until(deadline, waits));
    const auto short_waits = h.clock->waits();
    h.clock->advance(999ms);
    REQUIRE(h.clock->sleeps_until(deadline, short_waits));
    CHECK(h.children->kills().empty());
    h.clock->advance(1ms);
    REQUIRE(h.children->killed(pid));
    CHECK(h.children->kills() == std::vector<std::pair<pid_t, int>>{{pid, SIGKILL}});
    auto future = result.get_future();
    REQUIRE(future.wait_for(10s) == std::future_status::ready);
    const auto r = future.get();
    CHECK(r.task_id == id);
    CHECK(r.code == ErrorCode::TIMEOUT);
    CHECK_THAT(r.message, Catch::Contains("ran past its timeout of 1000 ms; worker /sub0 was killed and restarts"));
    CHECK(h.log
              .matching({"warning worker /sub0 (pid " + std::to_string(pid) + "): task " + std::to_string(id) +
                         " ran past its timeout of 1000 ms; killing the worker"})
              .size() == 1);
}

TEST_CASE("a nested node's worker tree shows under it, and an unreadable one is logged and leaves the tree before",
          "[daemon][lifecycle][tree]") {
    TempDir state;
    CapturedLog log;
    auto children = std::make_shared<FakeChildren>();
    auto o = l4_options(state.path, 1, 0);
    o.log = log.logger;
    o.drain_timeout = 0ms;
    daemon::SupervisorSeams seams;
    seams.launcher = [children](daemon::ChildMain) { return std::make_unique<FakeLauncher>(children); };
    daemon::Supervisor sup(std::move(o), std::move(seams));
    sup.start();
    REQUIRE(eventually(
        [&] { return worker_status(sup, "/node0") && worker_status(sup, "/node0")->state == WorkerState::RUNNING; }));

    children->report_status(0, R"([{"path": "/node0/sub7", "kind": "sub", "state": "running", "pid": 91}])");
    REQUIRE(eventually([&] { return worker_status(sup, "/node0/sub7").has_value(); }));
    CHECK(worker_status(sup, "/node0/sub7")->pid == 91);

    children->report_status(0, R"([{"path": "/node0/sub8", "state": "running", "pid": 1e300}])");
    REQUIRE(eventually([&] {
        return !log.matching({"worker /node0: its status report of", "is unreadable: [0].pid: 1e+300 is out of range"})
                    .empty();
    }));
    CHECK(worker_status(sup, "/node0/sub7").has_value());
    CHECK_FALSE(worker_status(sup, "/node0/sub8").has_value());
    sup.stop();
}
