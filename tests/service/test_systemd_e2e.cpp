// canopyd under systemd's protocols: sd_notify readiness and stopping, and the unit file.
#include "fixture.h"
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
    CHECK(notify.received().find("STATUS=2 workers up") != std::string::npos);
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
