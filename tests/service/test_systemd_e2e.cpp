// canopyd under systemd's protocols: sd_notify readiness and stopping, and the unit file.
#include "fixture.h"
#include "helpers.h"
#include "tests/proc_support.h"
#include "tests/skip.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <fstream>
#include <poll.h>
#include <regex>
#include <signal.h>
#include <sstream>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

using namespace canopy::e2e;

namespace {

// A NOTIFY_SOCKET: an AF_UNIX datagram socket collecting every notification.
class NotifySocket {
public:
    explicit NotifySocket(const std::filesystem::path& path) : path_(path.string()) {
        fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        std::strncpy(addr.sun_path, path_.c_str(), sizeof addr.sun_path - 1);
        REQUIRE(::bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    }
    ~NotifySocket() { ::close(fd_); }
    const std::string& path() const { return path_; }

    // Every datagram received until one contains `want` (true) or `limit` passes (false).
    bool wait_for(const std::string& want, std::chrono::milliseconds limit) {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (std::chrono::steady_clock::now() < deadline) {
            pollfd pfd{fd_, POLLIN, 0};
            if (::poll(&pfd, 1, 100) <= 0) {
                continue;
            }
            char buf[4096];
            const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
            if (n > 0) {
                received_.append(buf, static_cast<std::size_t>(n)).append("\n");
                if (received_.find(want) != std::string::npos) {
                    return true;
                }
            }
        }
        return false;
    }
    const std::string& received() const { return received_; }
    // Forgets what was received, so that the next wait_for sees only later notifications.
    void clear() { received_.clear(); }

private:
    std::string path_;
    int fd_ = -1;
    std::string received_;
};

} // namespace

TEST_CASE("canopyd tells systemd READY=1 once every child is up and STOPPING=1 on SIGTERM", "[service][systemd]") {
    TempDir dir;
    NotifySocket notify(dir.path / "notify.sock");
    Daemon d(e2e_config(1, 1), {{"NOTIFY_SOCKET", notify.path()}});
    REQUIRE(notify.wait_for("READY=1", std::chrono::seconds(10)));
    CHECK(notify.received().find("STATUS=2/2 workers up") != std::string::npos);
    // READY came after the children: the daemon already answers status with every worker running.
    const auto status = d.cli_json({"status"});
    for (const auto& w : status.at("workers")) {
        CHECK(w.at("state") == "running");
    }
    ::kill(d.pid(), SIGTERM);
    REQUIRE(notify.wait_for("STOPPING=1", std::chrono::seconds(10)));
    CHECK(d.stop() == 0);
}

TEST_CASE("canopyd pings the watchdog when the unit asks for one", "[service][systemd]") {
    TempDir dir;
    NotifySocket notify(dir.path / "notify.sock");
    Daemon d(e2e_config(1, 0), {{"NOTIFY_SOCKET", notify.path()}, {"WATCHDOG_USEC", "200000"}});
    REQUIRE(notify.wait_for("READY=1", std::chrono::seconds(10)));
    CHECK(notify.wait_for("WATCHDOG=1", std::chrono::seconds(3)));
}

TEST_CASE("systemd-analyze verify accepts the unit file", "[service][systemd]") {
    if (::access("/usr/bin/systemd-analyze", X_OK) != 0) {
        CANOPY_SKIP("systemd-analyze is not installed");
    }
    std::ifstream in(std::string(SCRIPTS_DIR) + "/canopyd.service");
    std::stringstream unit;
    unit << in.rdbuf();
    // Point the unit at the built binary: verify checks that ExecStart's program exists.
    const std::string text = std::regex_replace(unit.str(), std::regex("/usr/local/bin/canopyd"), CANOPYD_PATH);
    TempDir dir;
    const auto path = dir.path / "canopyd.service";
    std::ofstream(path) << text;
    const Output o = run_program("/usr/bin/systemd-analyze", {"verify", path.string()});
    INFO(o.out << o.err);
    CHECK(o.rc == 0);
    CHECK(text.find("Type=notify") != std::string::npos);
    CHECK(text.find("KillMode=mixed") != std::string::npos);
}

TEST_CASE("STATUS= and canopy status follow a worker that dies and is revived", "[service][systemd]") {
    TempDir dir;
    NotifySocket notify(dir.path / "notify.sock");
    Daemon d(e2e_config(1, 1, {{"supervision", {{"restart_budget", 0}, {"backoff_initial_ms", 10}}}}),
             {{"NOTIFY_SOCKET", notify.path()}});
    REQUIRE(notify.wait_for("READY=1", std::chrono::seconds(10)));
    CHECK(d.cli({"status"}).rc == 0);
    notify.clear();
    CHECK(d.cli({"submit", "abort", "--on", "chip0", "--wait"}).rc == 1);
    REQUIRE(
        notify.wait_for("STATUS=1/2 workers up; /chip0 dead: killed by signal 6 (SIGABRT)", std::chrono::seconds(10)));
    const Output dead = d.cli({"status"});
    CHECK(dead.rc == 1);
    CHECK(has_row(dead.out, {"chip0", "dead"}));
    notify.clear();
    const Output restart = d.cli({"worker", "restart", "chip0"});
    CHECK(restart.rc == 0);
    CHECK(restart.out == "worker chip0 restarts\n");
    REQUIRE(notify.wait_for("STATUS=2/2 workers up", std::chrono::seconds(10)));
    CHECK(d.cli({"status"}).rc == 0);
    CHECK(d.cli({"submit", "sleep_ms", "--on", "chip0", "--scalar", "int64:0", "--wait"}).rc == 0);
    CHECK(d.log().find("worker chip0: restart asked by uid " + std::to_string(::getuid())) != std::string::npos);
    const Output unknown = d.cli({"worker", "restart", "chip9"});
    CHECK(unknown.rc == 1);
    CHECK(unknown.err.find("UNKNOWN_WORKER") != std::string::npos);
}

TEST_CASE("canopyd exits 1 when its zygotes die faster than the restart budget allows", "[service][systemd]") {
    Daemon d(e2e_config(1, 0, {{"supervision", {{"restart_budget", 1}, {"backoff_initial_ms", 10}}}}));
    for (int round = 0; round < 2; ++round) {
        // The zygote is the parent of every worker; a promoted standby is nobody else's child.
        pid_t zygote = -1;
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (zygote <= 0 && std::chrono::steady_clock::now() < deadline) {
            const auto status = d.cli_json({"status"});
            const pid_t chip = worker_at(status, "/chip0").at("pid");
            if (chip > 0 && worker_at(status, "/chip0").at("state") == "running") {
                zygote = canopy::testing::proc_stat(chip).ppid;
            } else {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
        }
        REQUIRE(zygote > 1);
        REQUIRE(canopy::testing::proc_stat(zygote).comm == "canopy-zygote");
        REQUIRE(::kill(zygote, SIGKILL) == 0);
        if (round == 0) {
            const auto healed = std::chrono::steady_clock::now() + std::chrono::seconds(10);
            while (d.log().find("takes its place") == std::string::npos && std::chrono::steady_clock::now() < healed) {
                std::this_thread::sleep_for(std::chrono::milliseconds(20));
            }
            REQUIRE(d.log().find("the zygote (pid " + std::to_string(zygote) + ") killed by signal 9") !=
                    std::string::npos);
        }
    }
    const auto rc = d.wait_exit(std::chrono::seconds(20));
    INFO(d.log());
    REQUIRE(rc);
    CHECK(*rc == 1);
    CHECK(d.log().find("past the restart budget of 1; the tree cannot heal") != std::string::npos);
}
