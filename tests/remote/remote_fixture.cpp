#include "tests/remote/remote_fixture.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sstream>
#include <stdexcept>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

namespace canopy::e2e {

using nlohmann::json;

std::uint16_t free_tcp_port() {
    const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        throw std::runtime_error("socket failed");
    }
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof addr;
    if (::bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
        ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
        ::close(fd);
        throw std::runtime_error("bind to 127.0.0.1:0 failed");
    }
    ::close(fd);
    return ntohs(addr.sin_port);
}

std::string loopback(std::uint16_t port) {
    return "127.0.0.1:" + std::to_string(port);
}

json l3_config(const std::string& name, const std::string& listen, const json& tls, const json& extra) {
    json config = {
        {"node", {{"name", name}, {"level", 3}, {"chips", {{{"device", 0}, {"backend", "sim"}}}}, {"subs", 1}}},
        {"serve", {{"listen", listen}, {"tls", tls}, {"lost_after_ms", DEFAULT_LOST_AFTER_MS}}},
        {"supervision", {{"backoff_initial_ms", 10}, {"backoff_max_ms", 200}, {"drain_timeout_ms", 2000}}},
        {"testing", {{"fault_kernels", true}}},
        {"log", {{"level", "debug"}}}};
    for (const auto& [key, value] : extra.items()) {
        config[key] = value;
    }
    return config;
}

json remote_node(const std::string& name, const std::string& address, const json& tls, std::int64_t lost_after_ms) {
    return {{"name", name}, {"remote", address}, {"tls", tls}, {"lost_after_ms", lost_after_ms}};
}

json l4_config(const std::vector<json>& nodes, const json& extra) {
    json config = {{"node", {{"name", "rack"}, {"level", 4}, {"subs", 1}, {"nodes", nodes}}},
                   {"supervision", {{"backoff_initial_ms", 10}, {"backoff_max_ms", 200}, {"drain_timeout_ms", 2000}}},
                   {"log", {{"level", "debug"}}}};
    for (const auto& [key, value] : extra.items()) {
        config[key] = value;
    }
    return config;
}

bool eventually_running(const Daemon& d, const std::string& path, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
        RawClient c(d.socket());
        const json status = c.request({{"op", "status"}});
        for (const auto& w : status.at("workers")) {
            if (w.at("path") == path && w.at("state") == "running") {
                return true;
            }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

std::string eventually_last_exit(const Daemon& d, const std::string& path, const std::string& part,
                                 std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    std::string last;
    while (std::chrono::steady_clock::now() < deadline) {
        RawClient c(d.socket());
        const json status = c.request({{"op", "status"}});
        for (const auto& w : status.at("workers")) {
            if (w.at("path") == path && w.contains("last_exit") && w.at("last_exit").is_string()) {
                last = w.at("last_exit").get<std::string>();
            }
        }
        if (last.find(part) != std::string::npos) {
            return last;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return last;
}

std::string task_state(const Daemon& d, std::uint64_t id) {
    RawClient c(d.socket());
    const json listing = c.request({{"op", "tasks"}});
    for (const auto& t : listing.at("tasks")) {
        if (t.at("id") == id) {
            return t.at("state").get<std::string>();
        }
    }
    return "";
}

bool eventually_started(const Daemon& d, std::uint64_t id, std::chrono::milliseconds limit) {
    return eventually(
        [&] {
            const std::string state = task_state(d, id);
            return !state.empty() && state != "queued";
        },
        limit);
}

bool eventually(const std::function<bool()>& holds, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!holds()) {
        if (std::chrono::steady_clock::now() >= deadline) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

std::size_t count_log_lines(const Daemon& d, const std::vector<std::string>& parts) {
    std::istringstream lines(d.log());
    std::size_t count = 0;
    for (std::string line; std::getline(lines, line);) {
        bool all = true;
        for (const auto& part : parts) {
            all = all && line.find(part) != std::string::npos;
        }
        count += all ? 1 : 0;
    }
    return count;
}

bool has_log_line(const Daemon& d, const std::vector<std::string>& parts) {
    return count_log_lines(d, parts) > 0;
}

bool eventually_logged(const Daemon& d, const std::vector<std::string>& parts) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!has_log_line(d, parts)) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
}

} // namespace canopy::e2e
