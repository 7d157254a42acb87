#include "cli/app.h"

#include "cli/commands.h"
#include "cli/invocation.h"
#include "config/suggest.h"
#include "protocol/version.h"

#include <cstdlib>
#include <ostream>
#include <unistd.h>

namespace canopy::cli {

namespace {

constexpr const char* FOOTER =
    R"(Exit codes: 0 success, 1 a request or task failed, 2 usage error, 3 daemon unreachable.
Environment: CANOPY_SOCKET names the control socket when --socket is not given.
--json, -q and --socket PATH go before or after the command. See docs/cli.md.)";

void build(CLI::App& app, Invocation& inv, Action& action) {
    app.require_subcommand(1);
    app.set_version_flag("--version", version_line("canopy"));
    app.footer(FOOTER);
    // The options every command takes are the main app's too, and a subcommand hands what it does not know to
    // its parent: `canopy --json status`, `canopy status --json` and `canopy worker --json restart chip0` agree.
    add_common_options(app, inv);
    app.fallthrough();
    add_daemon_commands(app, inv, action);
    add_buffer_commands(app, inv, action);
    add_task_commands(app, inv, action);
}

// The deepest command the parse reached ("buffer" in `canopy buffer craete`).
const CLI::App& deepest_command(const CLI::App& app) {
    for (const CLI::App* sub : app.get_subcommands()) {
        return deepest_command(*sub);
    }
    return app;
}

// What a usage error says; a word where a command was expected is named, with the closest command when one is
// close ("unknown command \"stauts\" (did you mean \"status\"?)").
std::string usage_message(const CLI::App& app, const CLI::ParseError& e) {
    const CLI::App& reached = deepest_command(app);
    // With fallthrough, a word the command did not take may be left with the main app.
    std::vector<std::string> extra = reached.remaining(true);
    if (extra.empty()) {
        extra = app.remaining(true);
    }
    if (dynamic_cast<const CLI::RequiredError*>(&e) == nullptr || reached.get_subcommands({}).empty()) {
        return e.what();
    }
    std::vector<std::string> names;
    std::string known;
    for (const CLI::App* sub : reached.get_subcommands({})) {
        names.push_back(sub->get_name());
        known += (known.empty() ? "" : ", ") + sub->get_name();
    }
    if (extra.empty()) {
        return (&reached == &app ? std::string("a command is required")
                                 : "\"" + reached.get_name() + "\" needs a command") +
               ": " + known;
    }
    const std::vector<std::string_view> candidates(names.begin(), names.end());
    const std::string prefix = &reached == &app ? "" : reached.get_name() + " ";
    std::string message = "unknown command \"" + prefix + extra.front() + "\"";
    if (const auto hint = config::closest_match(extra.front(), candidates)) {
        message += " (did you mean \"" + prefix + std::string(*hint) + "\"?)";
    } else {
        message += "; commands: " + known;
    }
    return message;
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
        err << "canopy: USAGE: " << usage_message(app, e) << "\nRun with --help for more information.\n";
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
    if (inv.json() && inv.quiet()) {
        return inv.report(usage_error("--json and -q exclude each other"));
    }
    try {
        return action();
    } catch (const CliError& e) {
        return inv.report(e);
    } catch (const client::Error& e) {
        return inv.report(request_error(e.code_name(), e.what()));
    } catch (const client::ProtocolError& e) {
        return inv.report(protocol_error(e.what()));
    } catch (const std::exception& e) {
        return inv.report(CliError(ExitCode::FAILED, "INTERNAL", e.what()));
    }
}

} // namespace canopy::cli
