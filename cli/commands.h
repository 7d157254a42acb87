#pragma once
// The canopy subcommands, registered on a CLI11 App. Parsing a command line selects one: its callback
// stores the work to do in `action`, which run_cli calls after parsing succeeds.
//
// Each leaf command takes --json and --socket PATH (add_common_options). An action returns the exit code
// for an outcome it reports itself (a failed task) and throws CliError for everything else.
//
// Thread safety: one thread; the App, the Invocation and `action` outlive the parse and the action.

#include "cli/invocation.h"

#include <CLI/CLI.hpp>
#include <functional>
#include <nlohmann/json.hpp>

namespace canopy::cli {

using Action = std::function<int()>;

void add_common_options(CLI::App& command, Invocation& inv);

// status, metrics, shutdown, module load.
void add_daemon_commands(CLI::App& app, Invocation& inv, Action& action);
// buffer create | list | show | release | write | read.
void add_buffer_commands(CLI::App& app, Invocation& inv, Action& action);
// submit, run, wait, tasks.
void add_task_commands(CLI::App& app, Invocation& inv, Action& action);

// Prints a single TASKSTATE (the object under --json, else a one-row table). A failed or rejected task
// is also reported on stderr ("canopy: CODE: task NAME (id N): message") and gives exit code 1.
int finish_task(Invocation& inv, const nlohmann::json& task);

} // namespace canopy::cli
