#pragma once
// Test hosts on one machine, and the certificates of a test CA.
//
// TestNetwork makes one network namespace per host, named canopy<pid>-<host>, the first being the hub (the L4's
// host), and joins the hub to every other host by its own veth pair: hub 10.77.N.1/24 <-> host 10.77.N.2/24
// (N = 1, 2, ... in the order given). Addresses exist only inside these namespaces. `enter(host)` is the
// Daemon fixture's in_child for a daemon on that host: it joins the namespace and gives the process a mount
// namespace with a private /dev/shm, so hosts cannot share memory by accident. The namespaces are deleted on
// destruction. Needs root and iproute2; available() says whether they work here.
//
// DelayRelay delays a link in user space, for kernels without netem.
//
// TestCa makes, with the openssl command, a CA and certificates signed by it whose subjectAltName is DNS:<name>.
//
// Thread safety: none; test set-up.

#include "tests/service/fixture.h"

#include <atomic>
#include <chrono>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

namespace canopy::e2e {

class TestNetwork {
public:
    // Why test hosts cannot be made here (not root, no `ip`, namespaces refused), or "" when they can.
    static std::string unavailable();

    explicit TestNetwork(const std::vector<std::string>& hosts);
    ~TestNetwork();
    TestNetwork(const TestNetwork&) = delete;
    TestNetwork& operator=(const TestNetwork&) = delete;

    // A host's address on its link to the hub ("10.77.1.2"); the hub's own address toward that host is
    // hub_address(host).
    std::string address(const std::string& host) const;
    std::string hub_address(const std::string& host) const;
    // /run/netns/<the namespace of host>.
    std::string netns_path(const std::string& host) const { return "/run/netns/" + ns(host); }
    // The Daemon fixture's in_child for a daemon on `host`; `shm_bytes` > 0 sizes its private /dev/shm (a tmpfs of
    // half the machine's memory otherwise).
    std::function<bool()> enter(const std::string& host, std::uint64_t shm_bytes = 0) const;
    // Takes the hub's end of the link to `host` down or up (a partition).
    void set_link(const std::string& host, bool up) const;
    // Adds `ms` of delay to both directions of the link to `host` with netem; false when netem is not available
    // (the kernel lacks sch_netem). 0 removes it.
    bool set_delay(const std::string& host, int ms) const;

private:
    std::string ns(const std::string& host) const;
    std::string hub_dev(const std::string& host) const;
    std::string prefix_;
    std::vector<std::string> hosts_;
    std::map<std::string, int> index_;
};

class TestCa {
public:
    TestCa();
    // Files of a certificate for `name` (subjectAltName DNS:name, or `san` as openssl spells one: "email:rack")
    // signed by this CA, made on first use of `name`.
    struct Files {
        std::string cert;
        std::string key;
    };
    Files issue(const std::string& name, const std::string& san = {});
    const std::string& ca_file() const noexcept { return ca_; }
    // The tls object of one end: this CA, the certificate of `own`, and the peer's expected name.
    nlohmann::json tls(const std::string& own, const std::string& peer_name);

private:
    TempDir dir_;
    std::string ca_;
    std::string ca_key_;
    std::map<std::string, Files> issued_;
};

} // namespace canopy::e2e

namespace canopy::e2e {

// A TCP relay inside a host's network namespace that forwards every byte to `target` after `delay`, both ways:
// a slow link where the kernel has no netem. It listens on 127.0.0.1:port() of that namespace.
class DelayRelay {
public:
    DelayRelay(const std::string& netns_path, const std::string& target_host, std::uint16_t target_port,
               std::chrono::milliseconds delay);
    ~DelayRelay();
    DelayRelay(const DelayRelay&) = delete;
    DelayRelay& operator=(const DelayRelay&) = delete;
    std::uint16_t port() const noexcept { return port_; }

private:
    void accept_loop();
    void pump(int from, int to);

    std::chrono::milliseconds delay_;
    std::atomic<bool> stop_{false};
    int listener_ = -1;
    std::uint16_t port_ = 0;
    std::string target_host_;
    std::uint16_t target_port_;
    std::mutex mu_;
    std::vector<int> fds_;
    std::vector<std::thread> threads_;
    std::thread acceptor_;
};

} // namespace canopy::e2e
