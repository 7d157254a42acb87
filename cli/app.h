#pragma once
// run_cli: the whole `canopy` command line, in process. cli/main.cpp calls it with the process's
// arguments and streams; tests call it with their own and a fake daemon.
//
// Exit codes (docs/cli.md): 0 success, 1 a request or task failed, 2 usage error, 3 daemon
// unreachable. `--help` and `--version` print to `out` and return 0.
//
// Thread safety: reentrant; each call has its own parser and connection.

#include "cli/environment.h"

#include <iosfwd>
#include <string>
#include <vector>

namespace canopy::cli {

// `args` are the arguments after the program name: {"buffer", "list", "--json"}.
int run_cli(const std::vector<std::string>& args, std::ostream& out, std::ostream& err, const Environment& env);

} // namespace canopy::cli
