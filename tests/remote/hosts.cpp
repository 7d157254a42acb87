#include "tests/remote/hosts.h"

#include <arpa/inet.h>
#include <deque>
#include <fcntl.h>
#include <fstream>
#include <future>
#include <netinet/in.h>
#include <poll.h>
#include <sched.h>
#include <stdexcept>
#include <sys/mount.h>
#include <sys/socket.h>
#include <unistd.h>

namespace canopy::e2e {
namespace {

// Runs `ip ARGS`; throws with its output when it fails.
void ip(const std::vector<std::string>& args) {
    const Output o = run_program("/usr/sbin/ip", args);
    if (o.rc != 0) {
        std::string line = "ip";
        for (const auto& a : args) {
            line += " " + a;
        }
        throw std::runtime_error(line + " failed (" + std::to_string(o.rc) + "): " + o.err);
    }
}

} // namespace

std::string TestNetwork::unavailable() {
    if (::geteuid() != 0) {
        return "test hosts need root (network namespaces)";
    }
    if (::access("/usr/sbin/ip", X_OK) != 0) {
        return "test hosts need iproute2 (/usr/sbin/ip)";
    }
    const std::string name = "canopy" + std::to_string(::getpid()) + "-probe";
    if (run_program("/usr/sbin/ip", {"netns", "add", name}).rc != 0) {
        return "ip netns add is refused here";
    }
    run_program("/usr/sbin/ip", {"netns", "del", name});
    return "";
}

TestNetwork::TestNetwork(const std::vector<std::string>& hosts)
    : prefix_("canopy" + std::to_string(::getpid()) + "-"), hosts_(hosts) {
    for (std::size_t i = 0; i < hosts_.size(); ++i) {
        index_[hosts_[i]] = static_cast<int>(i);
    }
    try {
        for (const auto& h : hosts_) {
            ip({"netns", "add", ns(h)});
            ip({"-n", ns(h), "link", "set", "lo", "up"});
        }
        const std::string& hub = hosts_.front();
        for (std::size_t i = 1; i < hosts_.size(); ++i) {
            const std::string& h = hosts_[i];
            ip({"-n", ns(hub), "link", "add", hub_dev(h), "type", "veth", "peer", "name", "eth0", "netns", ns(h)});
            ip({"-n", ns(hub), "addr", "add", hub_address(h) + "/24", "dev", hub_dev(h)});
            ip({"-n", ns(h), "addr", "add", address(h) + "/24", "dev", "eth0"});
            ip({"-n", ns(hub), "link", "set", hub_dev(h), "up"});
            ip({"-n", ns(h), "link", "set", "eth0", "up"});
        }
    } catch (...) {
        for (const auto& h : hosts_) {
            run_program("/usr/sbin/ip", {"netns", "del", ns(h)});
        }
        throw;
    }
}

TestNetwork::~TestNetwork() {
    for (const auto& h : hosts_) {
        run_program("/usr/sbin/ip", {"netns", "del", ns(h)});
    }
}

std::string TestNetwork::ns(const std::string& host) const {
    return prefix_ + host;
}

std::string TestNetwork::hub_dev(const std::string& host) const {
    return "to-" + host;
}

std::string TestNetwork::address(const std::string& host) const {
    return "10.77." + std::to_string(index_.at(host)) + ".2";
}

std::string TestNetwork::hub_address(const std::string& host) const {
    return "10.77." + std::to_string(index_.at(host)) + ".1";
}

std::function<bool()> TestNetwork::enter(const std::string& host, std::uint64_t shm_bytes) const {
    const std::string path = "/run/netns/" + ns(host);
    const std::string options = "mode=1777" + (shm_bytes > 0 ? ",size=" + std::to_string(shm_bytes) : std::string());
    return [path, options] {
        // System calls only: this runs in the forked child before exec.
        const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
        if (fd < 0 || ::setns(fd, CLONE_NEWNET) != 0) {
            return false;
        }
        ::close(fd);
        if (::unshare(CLONE_NEWNS) != 0 || ::mount("none", "/", nullptr, MS_REC | MS_PRIVATE, nullptr) != 0) {
            return false;
        }
        return ::mount("shm", "/dev/shm", "tmpfs", MS_NOSUID | MS_NODEV, options.c_str()) == 0;
    };
}

void TestNetwork::set_link(const std::string& host, bool up) const {
    ip({"-n", ns(hosts_.front()), "link", "set", hub_dev(host), up ? "up" : "down"});
}

bool TestNetwork::set_delay(const std::string& host, int ms) const {
    const auto tc = [](const std::vector<std::string>& args) { return run_program("/usr/sbin/tc", args).rc == 0; };
    if (ms == 0) {
        return tc({"-n", ns(hosts_.front()), "qdisc", "del", "dev", hub_dev(host), "root"}) &&
               tc({"-n", ns(host), "qdisc", "del", "dev", "eth0", "root"});
    }
    const std::string delay = std::to_string(ms) + "ms";
    return tc({"-n", ns(hosts_.front()), "qdisc", "replace", "dev", hub_dev(host), "root", "netem", "delay", delay}) &&
           tc({"-n", ns(host), "qdisc", "replace", "dev", "eth0", "root", "netem", "delay", delay});
}

TestCa::TestCa() {
    ca_ = (dir_.path / "ca.pem").string();
    ca_key_ = (dir_.path / "ca.key").string();
    const Output o = run_program("/usr/bin/openssl",
                                 {"req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                                  "-keyout", ca_key_, "-out", ca_, "-days", "2", "-subj", "/CN=canopy test CA"});
    if (o.rc != 0) {
        throw std::runtime_error("openssl could not make the test CA: " + o.err);
    }
}

TestCa::Files TestCa::issue(const std::string& name, const std::string& san) {
    if (const auto it = issued_.find(name); it != issued_.end()) {
        return it->second;
    }
    const std::string base = (dir_.path / name).string();
    Files f{base + ".pem", base + ".key"};
    std::ofstream(base + ".ext") << "subjectAltName=" << (san.empty() ? "DNS:" + name : san) << "\n";
    Output o =
        run_program("/usr/bin/openssl", {"req", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                                         "-keyout", f.key, "-out", base + ".csr", "-subj", "/CN=" + name});
    if (o.rc == 0) {
        o = run_program("/usr/bin/openssl",
                        {"x509", "-req", "-in", base + ".csr", "-CA", ca_, "-CAkey", ca_key_, "-CAcreateserial", "-out",
                         f.cert, "-days", "2", "-extfile", base + ".ext"});
    }
    if (o.rc != 0) {
        throw std::runtime_error("openssl could not issue a certificate for " + name + ": " + o.err);
    }
    issued_.emplace(name, f);
    return f;
}

nlohmann::json TestCa::tls(const std::string& own, const std::string& peer_name) {
    const Files f = issue(own);
    return {{"ca", ca_}, {"cert", f.cert}, {"key", f.key}, {"peer_name", peer_name}};
}

} // namespace canopy::e2e

namespace canopy::e2e {

DelayRelay::DelayRelay(const std::string& netns_path, const std::string& target_host, std::uint16_t target_port,
                       std::chrono::milliseconds delay)
    : delay_(delay), target_host_(target_host), target_port_(target_port) {
    std::promise<std::string> started;
    auto ready = started.get_future();
    acceptor_ = std::thread([this, netns_path, &started] {
        // Network namespaces are per thread: this thread and the sockets it makes live in the host's.
        const int ns = ::open(netns_path.c_str(), O_RDONLY | O_CLOEXEC);
        if (ns < 0 || ::setns(ns, CLONE_NEWNET) != 0) {
            started.set_value("cannot enter " + netns_path);
            return;
        }
        ::close(ns);
        listener_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
        socklen_t len = sizeof addr;
        if (listener_ < 0 || ::bind(listener_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0 ||
            ::listen(listener_, 16) != 0 || ::getsockname(listener_, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
            started.set_value("cannot listen in " + netns_path);
            return;
        }
        port_ = ntohs(addr.sin_port);
        started.set_value("");
        accept_loop();
    });
    const std::string error = ready.get();
    if (!error.empty()) {
        acceptor_.join();
        throw std::runtime_error("DelayRelay: " + error);
    }
}

DelayRelay::~DelayRelay() {
    stop_ = true;
    {
        std::lock_guard lock(mu_);
        for (const int fd : fds_) {
            ::shutdown(fd, SHUT_RDWR);
        }
    }
    acceptor_.join();
    for (auto& t : threads_) {
        t.join();
    }
    for (const int fd : fds_) {
        ::close(fd);
    }
    if (listener_ >= 0) {
        ::close(listener_);
    }
}

void DelayRelay::accept_loop() {
    while (!stop_) {
        pollfd p{listener_, POLLIN, 0};
        if (::poll(&p, 1, 50) <= 0) {
            continue;
        }
        const int client = ::accept4(listener_, nullptr, nullptr, SOCK_CLOEXEC);
        if (client < 0) {
            continue;
        }
        const int server = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(target_port_);
        ::inet_pton(AF_INET, target_host_.c_str(), &addr.sin_addr);
        if (server < 0 || ::connect(server, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
            ::close(client);
            if (server >= 0) {
                ::close(server);
            }
            continue;
        }
        std::lock_guard lock(mu_);
        fds_.push_back(client);
        fds_.push_back(server);
        threads_.emplace_back([this, client, server] { pump(client, server); });
        threads_.emplace_back([this, client, server] { pump(server, client); });
    }
}

// Bytes read from `from` are written to `to` once `delay_` has passed since they arrived, in order.
void DelayRelay::pump(int from, int to) {
    std::deque<std::pair<std::chrono::steady_clock::time_point, std::string>> queue;
    bool open = true;
    while (!stop_ && (open || !queue.empty())) {
        const auto now = std::chrono::steady_clock::now();
        while (!queue.empty() && queue.front().first <= now) {
            const std::string& chunk = queue.front().second;
            for (std::size_t sent = 0; sent < chunk.size();) {
                const ssize_t n = ::send(to, chunk.data() + sent, chunk.size() - sent, MSG_NOSIGNAL);
                if (n <= 0) {
                    return;
                }
                sent += static_cast<std::size_t>(n);
            }
            queue.pop_front();
        }
        int wait_ms = 50;
        if (!queue.empty()) {
            wait_ms = static_cast<int>(std::max<std::int64_t>(
                std::chrono::duration_cast<std::chrono::milliseconds>(queue.front().first - now).count(), 0));
        }
        if (!open) {
            std::this_thread::sleep_for(std::chrono::milliseconds(wait_ms));
            continue;
        }
        pollfd p{from, POLLIN, 0};
        if (::poll(&p, 1, wait_ms) > 0) {
            char buf[65536];
            const ssize_t n = ::recv(from, buf, sizeof buf, 0);
            if (n <= 0) {
                open = false;
            } else {
                queue.emplace_back(std::chrono::steady_clock::now() + delay_,
                                   std::string(buf, static_cast<std::size_t>(n)));
            }
        }
    }
    ::shutdown(to, SHUT_WR);
}

} // namespace canopy::e2e
