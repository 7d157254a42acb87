// canopyd: the canopy supervisor service.
//
//   canopyd [--config FILE] [--socket PATH] [--state-dir DIR] [--check-config]
//
// Without --config it runs the embedded default topology. --check-config validates the configuration,
// prints the effective topology and exits (0 valid, 2 invalid). Otherwise it starts the process tree and
// serves until SIGTERM or SIGINT, then stops gracefully: in-flight work drains up to the drain timeout,
// every child exits, every buffer is released and unlinked, and the exit status is 0.

#include "config/config.h"
#include "config/config_error.h"
#include "daemon/supervisor.h"

#include <CLI/CLI.hpp>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>

#include <signal.h>
#include <unistd.h>

#include <iostream>

namespace {

using namespace canopy;

// Blocks the stop signals in this thread before any other thread exists, so every thread inherits the
// mask and only sigwait() below receives them.
sigset_t block_stop_signals() {
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    ::sigprocmask(SIG_BLOCK, &set, nullptr);
    return set;
}

int serve(const config::Config& cfg, const std::string& state_dir) {
    auto log = spdlog::stderr_color_mt("daemon");
    const sigset_t stop_signals = block_stop_signals();
    daemon::Supervisor sup(daemon::from_config(cfg, state_dir));
    log->info("zygote {} forked; starting {} children of {} (level {})", sup.zygote_pid(),
              sup.options().children.size(), cfg.node.name, cfg.node.level);
    sup.start();
    for (const auto& w : sup.status()) {
        log->info("{} {} pid {} {}", w.path, w.kind, w.pid, daemon::to_string(w.state));
    }
    log->info("ready");
    int sig = 0;
    sigwait(&stop_signals, &sig);
    log->info("received {}, stopping", sigabbrev_np(sig) ? sigabbrev_np(sig) : "signal");
    sup.stop();
    log->info("stopped");
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    CLI::App app{"canopyd: the canopy task daemon for GPU hosts"};
    std::string config_file;
    std::string socket_path;
    std::string state_dir;
    bool check_config = false;
    app.add_option("--config", config_file, "topology JSON file (default: the embedded default)");
    app.add_option("--socket", socket_path, "control socket path (overrides the config)");
    app.add_option("--state-dir", state_dir, "state directory (overrides the config)");
    app.add_flag("--check-config", check_config, "validate the configuration, print it and exit");
    CLI11_PARSE(app, argc, argv);

    config::Config cfg;
    try {
        cfg = config_file.empty() ? config::default_config() : config::load_config(config_file);
    } catch (const config::ConfigError& e) {
        std::cerr << "canopyd: " << (config_file.empty() ? "embedded default" : config_file) << ": " << e.what()
                  << "\n";
        return 2;
    }
    if (!socket_path.empty()) {
        cfg.control.socket = socket_path;
    }
    if (!state_dir.empty()) {
        cfg.state_dir = state_dir;
    }
    if (check_config) {
        std::cout << config::describe(cfg);
        return 0;
    }
    try {
        return serve(cfg, state_dir);
    } catch (const std::exception& e) {
        std::cerr << "canopyd: " << e.what() << "\n";
        return 1;
    }
}
