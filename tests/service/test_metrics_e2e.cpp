// The optional loopback HTTP listener for Prometheus.
#include "fixture.h"

#include <arpa/inet.h>
#include <catch2/catch.hpp>
#include <cstring>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

using namespace canopy::e2e;
using nlohmann::json;

namespace {

// A loopback port that was free a moment ago.
int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(fd);
    return ntohs(addr.sin_port);
}

// One HTTP/1.0 GET; returns the whole response.
std::string http_get(int port, const std::string& path) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0);
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
    REQUIRE(::send(fd, request.data(), request.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(request.size()));
    std::string response;
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
        response.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return response;
}

} // namespace

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
    // The CLI's copy says the same.
    const auto cli = d.cli({"metrics"});
    CHECK(cli.rc == 0);
    CHECK(cli.out.find("canopy_tasks_total{state=\"completed\"} 1") != std::string::npos);
}
