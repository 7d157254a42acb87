#include "cli/app.h"

#include "cli/commands.h"
#include "cli/invocation.h"

#include <cstdlib>
#include <ostream>
#include <unistd.h>

#ifndef CANOPY_VERSION
#define CANOPY_VERSION "unknown"
#endif

namespace canopy::cli {

namespace {

constexpr const char* FOOTER =
    R"(Exit codes: 0 success, 1 a request or task failed, 2 usage error, 3 daemon unreachable.
Environment: CANOPY_SOCKET names the control socket when --socket is not given.
Every command takes --json (machine-readable output) and --socket PATH. See docs/cli.md.)";

void build(CLI::App& app, Invocation& inv, Action& action) {
    app.require_subcommand(1);
    app.set_version_flag("--version", std::string("canopy ") + CANOPY_VERSION);
    app.footer(FOOTER);
    add_daemon_commands(app, inv, action);
    add_buffer_commands(app, inv, action);
    add_task_commands(app, inv, action);
}

// Parses the command line; returns the exit code when parsing ends the run (help, version, usage error).
std::optional<int> parse(CLI::App& app, const std::vector<std::string>& args, std::ostream& out, std::ostream& err) {
    std::vector<const char*> argv{"canopy"};
    for (const auto& a : args) {
        argv.push_back(a.c_str());
    }
    try {
        app.parse(static_cast<int>(argv.size()), argv.data());
    } catch (const CLI::Success& e) {
        // --help and --version end here.
        return app.exit(e, out, err);
    } catch (const CLI::ParseError& e) {
        const std::vector<std::string> extra = app.remaining(true);
        const std::string message = dynamic_cast<const CLI::RequiredError*>(&e) != nullptr && !extra.empty()
                                        ? "unknown command \"" + extra.front() + "\""
                                        : e.what();
        err << "canopy: USAGE: " << message << "\nRun with --help for more information.\n";
        return static_cast<int>(ExitCode::USAGE);
    }
    return std::nullopt;
}

} // namespace

Environment Environment::from_process() {
    Environment env;
    if (const char* socket = std::getenv("CANOPY_SOCKET")) {
        env.socket_env = socket;
    }
    env.stderr_is_tty = ::isatty(STDERR_FILENO) == 1;
    return env;
}

int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, const Environment& env) {
    Invocation inv(out, err, env);
    Action action;
    CLI::App app{"canopy: the command-line client of canopyd, the canopy task daemon", "canopy"};
    build(app, inv, action);
    if (const std::optional<int> done = parse(app, args, out, err)) {
        return *done;
    }
    try {
        return action();
    } catch (const CliError& e) {
        return inv.report(e);
    } catch (const std::exception& e) {
        return inv.report(CliError(ExitCode::FAILED, "INTERNAL", e.what()));
    }
}

} // namespace canopy::cli
