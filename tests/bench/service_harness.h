#pragma once
// The daemon's service run inside a benchmark's process, as canopyd runs it, on a private socket and state
// directory, with a connected client socket; and connecting more clients. Used by bench_service and
// bench_transfer.
//
// Construct it before the process starts any thread: the Service forks its zygote.

#include "daemon/service.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <string>
#include <sys/socket.h>
#include <sys/un.h>
#include <thread>
#include <unistd.h>

namespace canopy::bench {

// A connected Unix stream socket to `path`, or -1.
inline int connect_to(const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    std::strncpy(addr.sun_path, path.c_str(), sizeof addr.sun_path - 1);
    if (::connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
        ::close(fd);
        return -1;
    }
    return fd;
}

class ServiceHarness {
public:
    // `name`: the temporary directory's prefix. `configure` sets the topology (the node name is "bench"); the
    // socket and state directory are the harness's. Exits the process when the service does not come up.
    ServiceHarness(const std::string& name, const std::function<void(config::Config&)>& configure)
        : dir_(make_dir(name)), config_(make_config(dir_, configure)),
          service_(config_,
                   std::make_shared<spdlog::logger>("daemon", std::make_shared<spdlog::sinks::null_sink_mt>())),
          server_([this] { service_.run(); }) {
        for (int i = 0; i < 200 && fd_ < 0; ++i) {
            std::this_thread::sleep_for(std::chrono::milliseconds(20));
            fd_ = connect_to(socket());
        }
        if (fd_ < 0) {
            std::fprintf(stderr, "the service did not come up\n");
            std::exit(1);
        }
    }
    ~ServiceHarness() {
        ::close(fd_);
        service_.request_stop();
        server_.join();
        std::error_code ec;
        std::filesystem::remove_all(dir_, ec);
    }
    ServiceHarness(const ServiceHarness&) = delete;
    ServiceHarness& operator=(const ServiceHarness&) = delete;

    // The connection made at start.
    int fd() const noexcept { return fd_; }
    std::string socket() const { return config_.control.socket.string(); }
    const std::filesystem::path& dir() const noexcept { return dir_; }

private:
    static std::filesystem::path make_dir(const std::string& name) {
        std::string tmpl = "/tmp/" + name + "-XXXXXX"; // mkdtemp's template
        if (::mkdtemp(tmpl.data()) == nullptr) {
            std::perror("mkdtemp");
            std::exit(1);
        }
        return tmpl;
    }
    static config::Config make_config(const std::filesystem::path& dir,
                                      const std::function<void(config::Config&)>& configure) {
        config::Config cfg;
        cfg.node.name = "bench";
        configure(cfg);
        cfg.control.socket = dir / "canopy.sock";
        cfg.state_dir = dir / "state";
        return cfg;
    }

    std::filesystem::path dir_;
    config::Config config_;
    daemon::Service service_;
    std::thread server_;
    int fd_ = -1;
};

} // namespace canopy::bench
