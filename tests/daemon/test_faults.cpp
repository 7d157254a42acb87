#include "fixture.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <future>
#include <signal.h>
#include <thread>

using namespace canopy;
using namespace canopy::testing;
using daemon::Supervisor;

namespace {

// The pid of a running worker; never <= 0, so a test can never signal a process group or every process.
pid_t pid_of(const Supervisor& sup, const std::string& path) {
    for (const auto& w : sup.status()) {
        if (w.path == path && w.pid > 0) {
            return w.pid;
        }
    }
    FAIL("no running worker " << path);
    return 1 << 30;
}

// Waits until `path` runs, as a process other than `old` when that is given: a nested node reports its tree
// after the fact, so a worker's old incarnation can still be listed as running when its task's result arrives.
void wait_running(const Supervisor& sup, const std::string& path, pid_t old = -1) {
    for (int i = 0; i < 500; ++i) {
        for (const auto& w : sup.status()) {
            if (w.path == path && w.state == daemon::WorkerState::RUNNING && w.pid > 0 && w.pid != old) {
                return;
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL(path << " did not come back");
}

} // namespace

TEST_CASE("kill -9 of a busy worker fails its task with WORKER_DIED and the worker comes back", "[daemon]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 1, 1));
    sup.start();
    for (const std::string path : {"/chip0", "/sub0"}) {
        INFO(path);
        const pid_t before = pid_of(sup, path);
        REQUIRE(before > 0);
        std::promise<daemon::TaskResult> result;
        sup.submit(task("sleep_ms", path, {}, {ScalarArg::i64(10000)}),
                   [&](daemon::TaskResult r) { result.set_value(std::move(r)); });
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        REQUIRE(::kill(before, SIGKILL) == 0);
        const auto r = result.get_future().get();
        CHECK(r.code == ErrorCode::WORKER_DIED);
        CHECK_THAT(r.message, Catch::Contains("signal 9"));
        wait_running(sup, path);
        CHECK(pid_of(sup, path) != before);
        const auto next = sup.run(task("sleep_ms", path, {}, {ScalarArg::i64(1)}));
        CHECK(next.ok());
    }
}

TEST_CASE("fault kernels crash only their worker, which restarts", "[daemon]") {
    TempDir state;
    auto options = l3_options(state.path, 1, 1);
    options.fault_kernels = true;
    Supervisor sup(options);
    sup.start();
    for (const std::string path : {"/chip0", "/sub0"}) {
        for (const char* kernel : {"abort", "segfault"}) {
            INFO(path << " " << kernel);
            const auto r = sup.run(task(kernel, path, {}));
            CHECK(r.code == ErrorCode::WORKER_DIED);
            CHECK_THAT(r.message, Catch::Contains(std::string("signal ") + (kernel[0] == 'a' ? "6" : "11")));
            wait_running(sup, path);
            CHECK(sup.run(task("sleep_ms", path, {}, {ScalarArg::i64(0)})).ok());
        }
    }
}

TEST_CASE("fault kernels are unknown unless the config enables them", "[daemon]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 1, 0));
    sup.start();
    const auto r = sup.run(task("segfault", "chip0", {}));
    CHECK(r.code == ErrorCode::UNKNOWN_KERNEL);
}

TEST_CASE("a worker past its restart budget is dead and tasks aimed at it fail fast", "[daemon]") {
    TempDir state;
    auto options = l3_options(state.path, 1, 0);
    options.fault_kernels = true;
    options.restart_budget = 2;
    Supervisor sup(options);
    sup.start();
    for (int i = 0; i < 3; ++i) {
        CHECK(sup.run(task("abort", "chip0", {})).code == ErrorCode::WORKER_DIED);
        if (i < 2) {
            wait_running(sup, "/chip0");
        }
    }
    for (int i = 0; i < 100 && sup.status()[0].state != daemon::WorkerState::DEAD; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    REQUIRE(sup.status()[0].state == daemon::WorkerState::DEAD);
    const auto r = sup.run(task("sleep_ms", "chip0", {}, {ScalarArg::i64(0)}));
    CHECK(r.code == ErrorCode::WORKER_DIED);
    CHECK_THAT(r.message, Catch::Contains("dead"));
}

TEST_CASE("kill -9 of a nested node fails its task and the node comes back with its workers", "[daemon]") {
    TempDir state;
    Supervisor sup(l4_options(state.path, 1, 0));
    sup.start();
    const pid_t before = pid_of(sup, "/node0");
    REQUIRE(before > 0);
    std::promise<daemon::TaskResult> result;
    sup.submit(task("sleep_ms", "/node0/chip1", {}, {ScalarArg::i64(10000)}),
               [&](daemon::TaskResult r) { result.set_value(std::move(r)); });
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    REQUIRE(::kill(before, SIGKILL) == 0);
    const auto r = result.get_future().get();
    CHECK(r.code == ErrorCode::WORKER_DIED);
    CHECK_THAT(r.message, Catch::Contains("/node0") && Catch::Contains("signal 9"));
    wait_running(sup, "/node0");
    CHECK(sup.run(task("sleep_ms", "/node0/chip1", {}, {ScalarArg::i64(1)})).ok());
}

TEST_CASE("a task past its timeout fails with TIMEOUT and only its worker restarts", "[daemon]") {
    TempDir state;
    Supervisor sup(l4_options(state.path, 1, 1));
    sup.start();
    for (const std::string path : {"/sub0", "/node0/chip1"}) {
        INFO(path);
        const pid_t node_before = pid_of(sup, "/node0");
        const pid_t before = pid_of(sup, path);
        auto slow = task("sleep_ms", path, {}, {ScalarArg::i64(20000)});
        slow.timeout = std::chrono::milliseconds(200);
        const auto r = sup.run(std::move(slow));
        CHECK(r.code == ErrorCode::TIMEOUT);
        CHECK_THAT(r.message, Catch::Contains("timeout of 200 ms"));
        wait_running(sup, path, before);
        CHECK(pid_of(sup, path) != before);
        CHECK(pid_of(sup, "/node0") == node_before);
        auto quick = task("sleep_ms", path, {}, {ScalarArg::i64(1)});
        quick.timeout = std::chrono::milliseconds(5000);
        CHECK(sup.run(std::move(quick)).ok());
    }
}

TEST_CASE("illegal_address is refused on sim chips and subs, and unless fault kernels are on", "[daemon]") {
    TempDir state;
    auto options = l3_options(state.path, 1, 1);
    options.fault_kernels = true;
    Supervisor sup(options);
    sup.start();
    for (const char* worker : {"chip0", "sub0"}) {
        const auto r = sup.run(task("illegal_address", worker, {}));
        CHECK(r.code == ErrorCode::UNKNOWN_KERNEL);
        CHECK_THAT(r.message, Catch::Contains("only cuda chips"));
    }
    TempDir state2;
    Supervisor plain(l3_options(state2.path, 1, 0));
    plain.start();
    const auto r = plain.run(task("illegal_address", "chip0", {}));
    CHECK(r.code == ErrorCode::UNKNOWN_KERNEL);
    CHECK_THAT(r.message, Catch::Contains("fault kernels are disabled"));
}
