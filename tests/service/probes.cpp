#include "probes.h"

#include <arpa/inet.h>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <netinet/in.h>
#include <sstream>
#include <stdexcept>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>
#include <vector>

namespace canopy::e2e {

double cpu_seconds(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    const auto paren = text.rfind(')'); // the command name may hold spaces and parentheses
    if (paren == std::string::npos) {
        throw std::runtime_error("/proc/" + std::to_string(pid) + "/stat: unreadable");
    }
    std::istringstream fields(text.substr(paren + 2));
    std::vector<std::string> f;
    for (std::string s; fields >> s;) {
        f.push_back(s);
    }
    // f[0] is field 3 (state); utime and stime are fields 14 and 15, in clock ticks.
    const double ticks = static_cast<double>(::sysconf(_SC_CLK_TCK));
    return (std::stod(f.at(11)) + std::stod(f.at(12))) / ticks;
}

std::uint64_t rss_bytes(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/status");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("VmRSS:", 0) == 0) {
            return std::stoull(line.substr(6)) * 1024; // "VmRSS:   12345 kB"
        }
    }
    throw std::runtime_error("/proc/" + std::to_string(pid) + "/status: no VmRSS");
}

std::size_t open_fds(pid_t pid) {
    const std::filesystem::path dir = "/proc/" + std::to_string(pid) + "/fd";
    return static_cast<std::size_t>(
        std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()));
}

int free_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    ::close(fd);
    return ntohs(addr.sin_port);
}

int tcp_connect(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        throw std::runtime_error(std::string("socket: ") + std::strerror(errno));
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        const int err = errno;
        ::close(fd);
        throw std::runtime_error("connect 127.0.0.1:" + std::to_string(port) + ": " + std::strerror(err));
    }
    return fd;
}

std::string http_get(int port, const std::string& path) {
    const int fd = tcp_connect(port);
    const timeval limit{10, 0}; // a listener that never answers fails the caller instead of hanging it
    ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    const std::string request = "GET " + path + " HTTP/1.0\r\nHost: localhost\r\n\r\n";
    if (::send(fd, request.data(), request.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(request.size())) {
        ::close(fd);
        throw std::runtime_error("send to 127.0.0.1:" + std::to_string(port) + " failed");
    }
    std::string response;
    char buf[4096];
    ssize_t n;
    while ((n = ::recv(fd, buf, sizeof buf, 0)) > 0) {
        response.append(buf, static_cast<std::size_t>(n));
    }
    ::close(fd);
    return response;
}

} // namespace canopy::e2e
