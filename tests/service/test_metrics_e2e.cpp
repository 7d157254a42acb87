// The optional loopback HTTP listener for Prometheus.
#include "fixture.h"
#include "probes.h"
#include "protocol/version.h"
#include "tests/skip.h"

#include <catch2/catch.hpp>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

using namespace canopy::e2e;
using nlohmann::json;

TEST_CASE("the metrics listener serves Prometheus text on loopback and 404 elsewhere", "[service]") {
    const int port = free_port();
    json config = e2e_config(1, 1);
    config["metrics"] = {{"listen", "127.0.0.1:" + std::to_string(port)}};
    Daemon d(config);
    REQUIRE(d.cli({"submit", "sleep_ms", "--on", "sub0", "--scalar", "int64:1", "--wait"}).rc == 0);
    const std::string metrics = http_get(port, "/metrics");
    CHECK(metrics.rfind("HTTP/1.0 200 OK\r\n", 0) == 0);
    CHECK(metrics.find("Content-Type: text/plain; version=0.0.4") != std::string::npos);
    CHECK(metrics.find("canopy_tasks_total{state=\"completed\"} 1\n") != std::string::npos);
    CHECK(metrics.find("canopy_task_duration_seconds_count{worker=\"/sub0\"} 1\n") != std::string::npos);
    CHECK(metrics.find("canopy_worker_up{worker=\"/chip0\",kind=\"chip\"} 1\n") != std::string::npos);
    CHECK(metrics.find("canopy_buffers{backend=\"posix_shm\"} 0\n") != std::string::npos);
    const std::string other = http_get(port, "/other");
    CHECK(other.rfind("HTTP/1.0 404", 0) == 0);
    // A query string asks for the same page.
    CHECK(http_get(port, "/metrics?format=text").rfind("HTTP/1.0 200 OK\r\n", 0) == 0);
    CHECK_THAT(metrics, Catch::Contains("canopy_build_info{version=\"" + std::string(canopy::canopy_version()) +
                                        "\",task_args=\"1\""));
    // The CLI's copy says the same.
    const auto cli = d.cli({"metrics"});
    CHECK(cli.rc == 0);
    CHECK(cli.out.find("canopy_tasks_total{state=\"completed\"} 1") != std::string::npos);
}

TEST_CASE("1500 idle connections to the metrics port are closed by the listener and leave the control socket serving",
          "[service][limits]") {
    constexpr int IDLE = 1500;
    rlimit own{};
    ::getrlimit(RLIMIT_NOFILE, &own);
    if (own.rlim_max < IDLE + 256) {
        CANOPY_SKIP("this process may open only " << own.rlim_max << " file descriptors");
    }
    const rlimit before = own;
    own.rlim_cur = own.rlim_max;
    REQUIRE(::setrlimit(RLIMIT_NOFILE, &own) == 0);
    const int port = free_port();
    json config = e2e_config(1, 1);
    config["metrics"] = {{"listen", "127.0.0.1:" + std::to_string(port)}};
    // The daemon runs with the usual soft limit of 1024 descriptors: fewer than the idle connections.
    Daemon d(config, {}, [] {
        rlimit limit{};
        ::getrlimit(RLIMIT_NOFILE, &limit);
        limit.rlim_cur = 1024;
        return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
    });
    const auto opened = std::chrono::steady_clock::now(); // before any of them is accepted
    std::vector<int> idle;
    for (int i = 0; i < IDLE; ++i) {
        idle.push_back(tcp_connect(port));
    }
    const auto status = d.cli({"status"});
    CHECK(status.rc == 0);

    // Every idle connection ends without a byte of response: past the 64 the listener serves at once, or
    // after the 5 s head timeout.
    std::size_t closed = 0;
    std::size_t answered = 0;
    const auto deadline = opened + std::chrono::seconds(20);
    std::vector<bool> done(idle.size(), false);
    while (closed < idle.size() && std::chrono::steady_clock::now() < deadline) {
        for (std::size_t i = 0; i < idle.size(); ++i) {
            if (done[i]) {
                continue;
            }
            char c;
            const ssize_t n = ::recv(idle[i], &c, 1, MSG_DONTWAIT);
            if (n == 0 || (n < 0 && errno == ECONNRESET)) {
                done[i] = true;
                ++closed;
            } else if (n > 0) {
                done[i] = true;
                ++closed;
                ++answered;
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    CHECK(closed == idle.size());
    CHECK(answered == 0);
    CHECK(std::chrono::steady_clock::now() - opened >= std::chrono::seconds(5)); // the last 64 waited their timeout
    for (const int fd : idle) {
        ::close(fd);
    }
    CHECK(http_get(port, "/metrics").rfind("HTTP/1.0 200 OK\r\n", 0) == 0);
    CHECK(d.cli({"status"}).rc == 0);
    const std::string log = d.log();
    CHECK(log.find("metrics listener: 64 connections open, the most it serves") != std::string::npos);
    CHECK(log.find("accept failed") == std::string::npos);
    ::setrlimit(RLIMIT_NOFILE, &before);
}

TEST_CASE("metrics show each worker's queued and in-flight tasks and buffer bytes by owner", "[service]") {
    Daemon d(e2e_config(1, 0));
    const std::string buffer = d.create_buffer(4096);
    TempDir files;
    // Three tasks on one buffer: one runs, two wait for it in the daemon's scheduler, none of them queued at
    // the worker yet; then a long task without a buffer sits in chip0's mailbox behind the running one.
    const json view = {{"tensor", {{"buffer", buffer}, {"dtype", "float32"}, {"shape", {16}}}}, {"tag", "inout"}};
    json tasks = json::array();
    for (int i = 0; i < 3; ++i) {
        tasks.push_back({{"name", "s" + std::to_string(i)},
                         {"kernel", "sleep_ms"},
                         {"on", "chip0"},
                         {"args", {view, {{"scalar", {{"int64", 1500}}}}}}});
    }
    tasks.push_back(
        {{"name", "free"}, {"kernel", "sleep_ms"}, {"on", "chip0"}, {"args", {{{"scalar", {{"int64", 0}}}}}}});
    std::ofstream(files.path / "g.json") << json{{"tasks", tasks}}.dump();
    REQUIRE(d.cli({"run", (files.path / "g.json").string()}).rc == 0);
    REQUIRE(wait_task_started(d, "s0") == "running");
    const std::string text = d.cli({"metrics"}).out;
    CHECK_THAT(text, Catch::Contains("canopy_worker_in_flight_tasks{worker=\"/chip0\"} 2\n"));
    CHECK_THAT(text, Catch::Contains("canopy_worker_queued_tasks{worker=\"/chip0\"} 0\n"));
    CHECK_THAT(text,
               Catch::Contains("canopy_buffer_bytes_by_owner{owner=\"" + std::to_string(::getuid()) + "\"} 4096\n"));
    const json status = d.cli_json({"status"});
    CHECK(status.at("workers").at(0).at("in_flight") == 2);
}

TEST_CASE("the control and metrics limits of the config take effect in the daemon", "[service][limits]") {
    const int port = free_port();
    json config = e2e_config(0, 1);
    config["control"]["frame_timeout_ms"] = 300;
    config["metrics"] = {{"listen", "127.0.0.1:" + std::to_string(port)}, {"max_connections", 2}, {"timeout_ms", 300}};
    Daemon d(config);
    // Half a frame's length prefix, then nothing: refused and closed at the configured frame timeout.
    const int control = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    REQUIRE(control >= 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string path = d.socket();
    std::memcpy(addr.sun_path, path.c_str(), path.size() + 1);
    REQUIRE(::connect(control, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) == 0);
    REQUIRE(::send(control, "\x10\x00", 2, MSG_NOSIGNAL) == 2);
    std::string refusal;
    char c;
    for (char chunk[512]; const ssize_t n = ::recv(control, chunk, sizeof chunk, 0);) { // until the daemon closes it
        REQUIRE(n > 0);
        refusal.append(chunk, static_cast<std::size_t>(n));
    }
    CHECK_THAT(refusal, Catch::Contains("frame incomplete after 300 ms"));
    ::close(control);
    // Three idle metrics connections: one past the configured two is closed at once, the others at 300 ms.
    std::vector<int> idle;
    for (int i = 0; i < 3; ++i) {
        idle.push_back(tcp_connect(port));
    }
    for (const int fd : idle) {
        CHECK(::recv(fd, &c, 1, 0) <= 0);
        ::close(fd);
    }
    CHECK(http_get(port, "/metrics").rfind("HTTP/1.0 200 OK\r\n", 0) == 0);
    const std::string log = d.log();
    CHECK_THAT(log, Catch::Contains("metrics listener: 2 connections open, the most it serves"));
}
