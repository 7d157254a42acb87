// canopyd: the canopy supervisor service.
//
//   canopyd [--config FILE] [--socket PATH] [--state-dir DIR] [--check-config]
//   canopyd --version
//
// Without --config it runs the embedded default topology. --check-config validates the configuration,
// prints the effective topology and exits (0 valid, 2 invalid); a usage error exits 2. Otherwise it starts the process
// tree and serves until SIGTERM or SIGINT, then stops gracefully: in-flight work drains up to the drain timeout, every
// child exits, every buffer is released and unlinked, and the exit status is 0. Logs go to stderr, with syslog priority
// prefixes when stderr is the journal (log.format auto) or log.format is journal.

#include "config/config.h"
#include "config/config_error.h"
#include "daemon/notify.h"
#include "daemon/service.h"
#include "ipc/cpus.h"
#include "protocol/version.h"

#include <CLI/CLI.hpp>
#include <iostream>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <spdlog/spdlog.h>
#include <sys/resource.h>

namespace {

using namespace canopy;

// Syslog priority prefix ("<3>") for journald, which reads it from each line of stderr.
class PriorityFlag : public spdlog::custom_flag_formatter {
public:
    void format(const spdlog::details::log_msg& msg, const std::tm&, spdlog::memory_buf_t& dest) override {
        static constexpr const char* PRIORITY[] = {"<7>", "<7>", "<6>", "<4>", "<3>", "<2>", "<6>"};
        const char* p = PRIORITY[static_cast<int>(msg.level)];
        dest.append(p, p + 3);
    }
    std::unique_ptr<custom_flag_formatter> clone() const override { return std::make_unique<PriorityFlag>(); }
};

std::shared_ptr<spdlog::logger> make_logger(const config::LogConfig& cfg) {
    auto log = spdlog::stderr_color_mt("daemon");
    const bool journal = cfg.format == config::LogFormat::JOURNAL ||
                         (cfg.format == config::LogFormat::AUTO && daemon::stderr_is_journal());
    if (journal) {
        auto formatter = std::make_unique<spdlog::pattern_formatter>();
        formatter->add_flag<PriorityFlag>('*').set_pattern("%*%v");
        log->set_formatter(std::move(formatter));
    } else {
        log->set_pattern("%Y-%m-%d %H:%M:%S.%e %^%l%$ %v");
    }
    log->set_level(static_cast<spdlog::level::level_enum>(static_cast<int>(cfg.level)));
    return log;
}

// Raises the soft limit of open files to the hard one: every child takes a mailbox, a socket pair and the
// fds of the buffers it maps, and a soft limit of 1024 (the usual default outside systemd) runs out long
// before the hard one does. Returns the limit in force.
rlim_t raise_fd_limit() {
    rlimit limit{};
    if (::getrlimit(RLIMIT_NOFILE, &limit) != 0) {
        return 0;
    }
    if (limit.rlim_cur < limit.rlim_max) {
        rlimit raised = limit;
        raised.rlim_cur = limit.rlim_max;
        if (::setrlimit(RLIMIT_NOFILE, &raised) == 0) {
            return raised.rlim_cur;
        }
    }
    return limit.rlim_cur;
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
    app.set_version_flag("--version", version_line("canopyd"));
    try {
        app.parse(argc, argv);
    } catch (const CLI::Success& e) {
        return app.exit(e); // --help, --version
    } catch (const CLI::ParseError& e) {
        std::cerr << "canopyd: usage: " << e.what() << "\nRun with --help for more information.\n";
        return 2;
    }

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
        auto log = make_logger(cfg.log);
        log->debug("open file limit: {}", raise_fd_limit());
        const ipc::SpinDecision& spin = ipc::spin_decision();
        log->log(spin.unknown_value ? spdlog::level::warn : spdlog::level::info, "spinning waits: {}", spin.summary());
        daemon::Service service(cfg, log);
        return service.run();
    } catch (const std::exception& e) {
        std::cerr << "canopyd: " << e.what() << "\n";
        return 1;
    }
}
