// The tree heals and says so: zygote deaths, the standby, dead workers revived, the log of every death, status
// answered from kept state, and a bounded stop.
#include "fixture.h"
#include "lifecycle_support.h"
#include "tests/skip.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <future>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>

using namespace canopy;
using namespace canopy::testing;
using daemon::Supervisor;
using daemon::WorkerState;

namespace {

std::map<std::string, pid_t> worker_pids(const Supervisor& sup) {
    std::map<std::string, pid_t> out;
    for (const auto& w : sup.status()) {
        out[w.path] = w.pid;
    }
    return out;
}

// Kills the zygote and waits until the standby took over and every worker runs again with a new pid.
void kill_zygote_and_heal(Supervisor& sup, const CapturedLog& log) {
    const pid_t zygote = sup.zygote_pid();
    const pid_t standby = sup.standby_zygote_pid();
    REQUIRE(zygote > 0);
    REQUIRE(eventually([&] { return sup.standby_zygote_pid() > 0; }));
    const auto before = worker_pids(sup);
    REQUIRE(::kill(zygote, SIGKILL) == 0);
    REQUIRE(eventually([&] { return sup.zygote_pid() != zygote; }));
    CHECK(sup.zygote_pid() == (standby > 0 ? standby : sup.zygote_pid()));
    REQUIRE(eventually([&] {
        const auto now = worker_pids(sup);
        return all_running(sup) &&
               std::all_of(now.begin(), now.end(), [&](const auto& e) { return before.at(e.first) != e.second; });
    }));
    INFO(log.dump());
    CHECK(log.matching({"the zygote (pid " + std::to_string(zygote) + ")", "takes its place"}).size() == 1);
    for (const auto& [path, pid] : before) {
        CHECK(log.matching({"worker " + path + " (pid " + std::to_string(pid) + ")", "died with the zygote"}).size() ==
              1);
    }
    CHECK(sup.run(task("sleep_ms", "chip0", {}, {ScalarArg::i64(0)})).ok());
    CHECK(sup.run(task("sleep_ms", "sub0", {}, {ScalarArg::i64(0)})).ok());
}

} // namespace

TEST_CASE("when the zygote dies its standby takes over and every worker comes back", "[daemon][healing]") {
    TempDir state;
    CapturedLog log;
    auto options = l3_options(state.path, 1, 1);
    options.log = log.logger;
    Supervisor sup(options);
    sup.start();
    const pid_t first = sup.zygote_pid();
    kill_zygote_and_heal(sup, log);
    // The first zygote was this process's child and is reaped: no zombie is left.
    CHECK(::waitpid(first, nullptr, WNOHANG) == -1);
    CHECK(log.matching({"the zygote (pid " + std::to_string(first) + ") killed by signal 9 (SIGKILL)"}).size() == 1);
    // The promoted standby is not our child; it heals the same way, and it forked a standby of its own.
    kill_zygote_and_heal(sup, log);
    kill_zygote_and_heal(sup, log);
    CHECK(sup.status()[0].restarts == 3);
}

TEST_CASE("without a standby a zygote death is fatal and every worker is dead", "[daemon][healing]") {
    TempDir state;
    CapturedLog log;
    auto options = l3_options(state.path, 1, 1);
    options.log = log.logger;
    options.standby_zygote = false;
    Supervisor sup(options);
    std::promise<std::string> fatal;
    sup.set_on_fatal([&](const std::string& why) { fatal.set_value(why); });
    sup.start();
    const pid_t zygote = sup.zygote_pid();
    REQUIRE(::kill(zygote, SIGKILL) == 0);
    auto why = fatal.get_future();
    REQUIRE(why.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
    CHECK_THAT(why.get(), Catch::Contains("no standby"));
    for (const auto& w : sup.status()) {
        CHECK(w.state == WorkerState::DEAD);
        CHECK_THAT(w.last_exit, Catch::Contains("zygote"));
    }
    const auto r = sup.run(task("sleep_ms", "chip0", {}, {ScalarArg::i64(0)}));
    CHECK(r.code == ErrorCode::WORKER_DIED);
    CHECK(log.matching({"critical", "cannot heal"}).size() == 1);
    CHECK_THROWS_WITH(sup.restart_worker("chip0"), Catch::Contains("cannot restart"));
}

TEST_CASE("a standby that dies is replaced by the zygote", "[daemon][healing]") {
    TempDir state;
    CapturedLog log;
    auto options = l3_options(state.path, 1, 0);
    options.log = log.logger;
    Supervisor sup(options);
    sup.start();
    REQUIRE(eventually([&] { return sup.standby_zygote_pid() > 0; }));
    const pid_t standby = sup.standby_zygote_pid();
    // The standby names itself once forked: its pid is known before that.
    CHECK(eventually([&] { return proc_stat(standby).comm == "canopy-standby"; }));
    REQUIRE(::kill(standby, SIGKILL) == 0);
    REQUIRE(eventually([&] { return sup.standby_zygote_pid() > 0 && sup.standby_zygote_pid() != standby; }));
    CHECK(log.matching({"standby zygote pid " + std::to_string(standby), "killed by signal 9"}).size() == 1);
    CHECK(all_running(sup));
}

TEST_CASE("the zygote of a nested node heals inside the node", "[daemon][healing]") {
    TempDir state;
    Supervisor sup(l4_options(state.path, 1, 0));
    sup.start();
    const pid_t node = worker_status(sup, "/node0")->pid;
    std::vector<pid_t> zygotes;
    REQUIRE(eventually([&] {
        zygotes = children_named(node, "canopy-zygote");
        return zygotes.size() == 1;
    }));
    const pid_t chip_before = worker_status(sup, "/node0/chip1")->pid;
    REQUIRE(::kill(zygotes[0], SIGKILL) == 0);
    REQUIRE(eventually([&] {
        const auto w = worker_status(sup, "/node0/chip1");
        return w && w->state == WorkerState::RUNNING && w->pid > 0 && w->pid != chip_before;
    }));
    CHECK(worker_status(sup, "/node0")->pid == node);
    CHECK(sup.run(task("sleep_ms", "/node0/chip1", {}, {ScalarArg::i64(1)})).ok());
    // The parent counts the tasks of the node's workers itself, across the node's own restarts.
    CHECK(sup.run(task("sleep_ms", "/node0/chip1", {}, {ScalarArg::i64(1)})).ok());
    CHECK(worker_status(sup, "/node0/chip1")->tasks_done == 2);
    CHECK(worker_status(sup, "/node0/chip0")->tasks_done == 0);
}

TEST_CASE("worker restart revives a worker marked dead", "[daemon][healing]") {
    TempDir state;
    CapturedLog log;
    auto options = l3_options(state.path, 1, 0);
    options.fault_kernels = true;
    options.restart_budget = 0;
    options.log = log.logger;
    Supervisor sup(options);
    sup.start();
    const pid_t pid = worker_status(sup, "/chip0")->pid;
    CHECK(sup.run(task("abort", "chip0", {})).code == ErrorCode::WORKER_DIED);
    REQUIRE(eventually([&] { return worker_status(sup, "/chip0")->state == WorkerState::DEAD; }));
    INFO(log.dump());
    CHECK(log.matching({"error", "worker /chip0 (pid " + std::to_string(pid) + ") killed by signal 6 (SIGABRT)",
                        "marked dead after 0 restarts", "canopy worker restart /chip0"})
              .size() == 1);
    CHECK(sup.run(task("sleep_ms", "chip0", {}, {ScalarArg::i64(0)})).code == ErrorCode::WORKER_DIED);
    sup.restart_worker("/chip0");
    REQUIRE(eventually([&] { return all_running(sup); }));
    CHECK(sup.run(task("sleep_ms", "chip0", {}, {ScalarArg::i64(0)})).ok());
    CHECK(log.matching({"worker /chip0: revived"}).size() == 1);
    CHECK_THROWS_AS(sup.restart_worker("/chip7"), daemon::RequestError);
}

TEST_CASE("worker restart of a live nested worker kills it and it comes back", "[daemon][healing]") {
    TempDir state;
    Supervisor sup(l4_options(state.path, 1, 0));
    sup.start();
    const pid_t before = worker_status(sup, "/node0/sub1")->pid;
    const pid_t node = worker_status(sup, "/node0")->pid;
    sup.restart_worker("node0/sub1");
    REQUIRE(eventually([&] {
        const auto w = worker_status(sup, "/node0/sub1");
        return w->state == WorkerState::RUNNING && w->pid > 0 && w->pid != before;
    }));
    CHECK(worker_status(sup, "/node0/sub1")->restarts == 1);
    CHECK(worker_status(sup, "/node0")->pid == node);
    // The node itself restarts the same way, and its workers with it.
    sup.restart_worker("/node0");
    REQUIRE(eventually([&] {
        const auto w = worker_status(sup, "/node0");
        return w->state == WorkerState::RUNNING && w->pid != node && all_running(sup);
    }));
}

TEST_CASE("status keeps the workers of a dead node and answers while a node is stopped", "[daemon][healing]") {
    TempDir state;
    auto options = l4_options(state.path, 2, 0);
    options.restart_budget = 0;
    Supervisor sup(options);
    sup.start();
    const std::size_t whole = sup.status().size();
    REQUIRE(whole == 2 + 2 * 4);

    // A stopped node does not answer anything; status comes from what it last reported.
    const pid_t node1 = worker_status(sup, "/node1")->pid;
    REQUIRE(::kill(node1, SIGSTOP) == 0);
    const auto while_stopped = sup.status();
    CHECK(while_stopped.size() == whole);
    CHECK(worker_status(sup, "/node1/chip0")->state == WorkerState::RUNNING);
    CHECK(sup.run(task("sleep_ms", "/node0/chip0", {}, {ScalarArg::i64(0)})).ok());
    REQUIRE(::kill(node1, SIGCONT) == 0);

    const pid_t node0 = worker_status(sup, "/node0")->pid;
    REQUIRE(::kill(node0, SIGKILL) == 0);
    REQUIRE(eventually([&] { return worker_status(sup, "/node0")->state == WorkerState::DEAD; }));
    const auto after = sup.status();
    CHECK(after.size() == whole);
    for (const char* path : {"/node0/chip0", "/node0/chip1", "/node0/sub0", "/node0/sub1"}) {
        const auto w = worker_status(sup, path);
        REQUIRE(w);
        CHECK(w->state == WorkerState::DEAD);
        CHECK(w->pid == -1);
        CHECK_THAT(w->last_exit, Catch::Contains("node /node0 is dead"));
    }
}

TEST_CASE("every worker death is logged once with its path, pid and signal", "[daemon][healing]") {
    TempDir state;
    CapturedLog log;
    auto options = l3_options(state.path, 1, 1);
    options.log = log.logger;
    Supervisor sup(options);
    sup.start();
    for (const std::string path : {"/chip0", "/sub0"}) {
        const pid_t pid = worker_status(sup, path)->pid;
        INFO(path << ": killed pid " << pid);
        REQUIRE(pid > 0);
        REQUIRE(::kill(pid, SIGKILL) == 0);
        REQUIRE(eventually([&] {
            const auto w = worker_status(sup, path);
            return w->state == WorkerState::RUNNING && w->pid != pid;
        }));
        INFO("then pid " << worker_status(sup, path)->pid << " restarts " << worker_status(sup, path)->restarts);
        // The lines are written after the state they report changed: wait for them, then check each is there once.
        const std::vector<std::string> death = {
            "warning", "worker " + path + " (pid " + std::to_string(pid) + ") killed by signal 9 (SIGKILL)",
            "restart 1 in 10 ms"};
        const std::vector<std::string> up = {"info", "worker " + path, "is up again after 1 restarts"};
        CHECK(eventually([&] { return !log.matching(death).empty() && !log.matching(up).empty(); }));
        INFO(log.dump());
        CHECK(log.matching(death).size() == 1);
        CHECK(log.matching(up).size() == 1);
    }
}

TEST_CASE("a timeout kill is logged before the death it causes", "[daemon][healing]") {
    TempDir state;
    CapturedLog log;
    auto options = l3_options(state.path, 0, 1);
    options.log = log.logger;
    Supervisor sup(options);
    sup.start();
    auto slow = task("sleep_ms", "sub0", {}, {ScalarArg::i64(20000)});
    slow.timeout = std::chrono::milliseconds(100);
    const auto r = sup.run(std::move(slow));
    CHECK(r.code == ErrorCode::TIMEOUT);
    INFO(log.dump());
    CHECK(log.matching({"worker /sub0", "ran past its timeout of 100 ms; killing the worker"}).size() == 1);
    CHECK(log.matching({"worker /sub0", "killed by signal 9", "1 task failed"}).size() == 1);
}

TEST_CASE("stop with a busy worker ends at the drain deadline plus the stop grace", "[daemon][healing]") {
    TempDir state;
    auto options = l3_options(state.path, 0, 1);
    options.drain_timeout = std::chrono::milliseconds(500);
    Supervisor sup(options);
    sup.start();
    std::promise<daemon::TaskResult> result;
    sup.submit(task("sleep_ms", "sub0", {}, {ScalarArg::i64(60000)}),
               [&](daemon::TaskResult r) { result.set_value(std::move(r)); });
    const auto begin = std::chrono::steady_clock::now();
    sup.stop();
    const auto took = std::chrono::steady_clock::now() - begin;
    CHECK(took < options.drain_timeout + Supervisor::STOP_GRACE + std::chrono::seconds(2));
    CHECK(result.get_future().get().code == ErrorCode::WORKER_DIED);
}

// While it lives, this process can open no file descriptor at all: with a soft RLIMIT_NOFILE of 0 every new fd
// is refused EMFILE, also one that a closed fd just gave back, in every thread.
class NoFreeFds {
public:
    NoFreeFds() {
        REQUIRE(::getrlimit(RLIMIT_NOFILE, &saved_) == 0);
        rlimit none = saved_;
        none.rlim_cur = 0;
        REQUIRE(::setrlimit(RLIMIT_NOFILE, &none) == 0);
        REQUIRE(::open("/dev/null", O_RDONLY | O_CLOEXEC) == -1);
    }
    ~NoFreeFds() { restore(); }
    NoFreeFds(const NoFreeFds&) = delete;
    NoFreeFds& operator=(const NoFreeFds&) = delete;
    void restore() {
        if (!restored_) {
            ::setrlimit(RLIMIT_NOFILE, &saved_);
            restored_ = true;
        }
    }

private:
    rlimit saved_{};
    bool restored_ = false;
};

TEST_CASE("a worker that cannot be restarted for want of file descriptors is retried and comes back",
          "[daemon][healing]") {
#ifdef CANOPY_SANITIZED // the sanitizer build: ASan and UBSan together
    CANOPY_SKIP("UBSan's vptr check needs a free file descriptor, which this test takes away");
#endif
    TempDir state;
    CapturedLog log;
    auto options = l3_options(state.path, 0, 1);
    options.log = log.logger;
    Supervisor sup(options);
    sup.start();
    REQUIRE(eventually([&] { return sup.standby_zygote_pid() > 0; }));
    const pid_t zygote = sup.zygote_pid();
    const pid_t pid = worker_status(sup, "/sub0")->pid;
    bool refused = false;
    {
        NoFreeFds no_fds;
        REQUIRE(::kill(pid, SIGKILL) == 0);
        refused = eventually([&] { return !log.matching({"worker /sub0", "could not be started"}).empty(); });
    }
    INFO(log.dump());
    CHECK(refused);
    CHECK_FALSE(log.matching({"could not be started", "Too many open files", "restart"}).empty());
    REQUIRE(eventually([&] {
        const auto w = worker_status(sup, "/sub0");
        return w->state == WorkerState::RUNNING && w->pid != pid;
    }));
    CHECK(sup.run(task("sleep_ms", "sub0", {}, {ScalarArg::i64(0)})).ok());
    CHECK(sup.zygote_pid() == zygote);
}

TEST_CASE("a standby zygote whose socket cannot be received for want of file descriptors is replaced later, and "
          "the zygote stays",
          "[daemon][healing]") {
#ifdef CANOPY_SANITIZED
    CANOPY_SKIP("UBSan's vptr check needs a free file descriptor, which this test takes away");
#endif
    TempDir state;
    CapturedLog log;
    auto options = l3_options(state.path, 0, 1);
    options.log = log.logger;
    Supervisor sup(options);
    sup.start();
    REQUIRE(eventually([&] { return sup.standby_zygote_pid() > 0; }));
    const pid_t zygote = sup.zygote_pid();
    const pid_t standby = sup.standby_zygote_pid();
    bool lost = false;
    {
        NoFreeFds no_fds;
        // The zygote forks the next standby and sends its socket, which this process cannot take.
        REQUIRE(::kill(standby, SIGKILL) == 0);
        lost = eventually([&] {
            return !log.matching({"standby zygote pid", "could not be received", "out of file descriptors"}).empty() &&
                   !log.matching({"standby zygote pid", "exited with code 0", "when it next starts a child"}).empty();
        });
    }
    INFO(log.dump());
    CHECK(lost);
    CHECK(log.matching({"reading the zygote's events failed"}).empty());
    CHECK(sup.zygote_pid() == zygote);
    CHECK(sup.standby_zygote_pid() <= 0);
    // The next child start brings a standby again, and the tree serves throughout.
    CHECK(sup.run(task("sleep_ms", "sub0", {}, {ScalarArg::i64(0)})).ok());
    const pid_t pid = worker_status(sup, "/sub0")->pid;
    REQUIRE(::kill(pid, SIGKILL) == 0);
    REQUIRE(eventually([&] {
        const auto w = worker_status(sup, "/sub0");
        return w->state == WorkerState::RUNNING && w->pid != pid && sup.standby_zygote_pid() > 0;
    }));
    CHECK(sup.standby_zygote_pid() != standby);
    CHECK(sup.zygote_pid() == zygote);
    CHECK(sup.run(task("sleep_ms", "sub0", {}, {ScalarArg::i64(0)})).ok());
}

TEST_CASE("a sub goes back to the default priority, which chips and the zygote stay above with the supervisor",
          "[daemon]") {
    errno = 0;
    const int before = ::getpriority(PRIO_PROCESS, 0);
    REQUIRE(errno == 0);
    if (::setpriority(PRIO_PROCESS, 0, -5) != 0) {
        CANOPY_SKIP("raising this thread's priority needs root or CAP_SYS_NICE: " << std::strerror(errno));
    }
    // The zygote is forked from this thread, and every child from the zygote, each inheriting its nice value.
    TempDir state;
    Supervisor sup(l3_options(state.path, 1, 1));
    sup.start();
    REQUIRE(::setpriority(PRIO_PROCESS, 0, before) == 0);
    const auto pids = worker_pids(sup);
    errno = 0;
    CHECK(::getpriority(PRIO_PROCESS, static_cast<id_t>(sup.zygote_pid())) == -5);
    CHECK(::getpriority(PRIO_PROCESS, static_cast<id_t>(pids.at("/chip0"))) == -5);
    CHECK(::getpriority(PRIO_PROCESS, static_cast<id_t>(pids.at("/sub0"))) == 0);
    CHECK(errno == 0);
    CHECK(sup.run(task("sleep_ms", "sub0", {}, {ScalarArg::i64(0)})).ok());
}
