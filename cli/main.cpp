// canopy: the command-line client of canopyd. Every command is documented in docs/cli.md; the work is
// done by run_cli in canopy_cli_lib.

#include "cli/app.h"

#include <iostream>

int main(int argc, char** argv) {
    const std::vector<std::string> args(argv + 1, argv + argc);
    return canopy::cli::run_cli(args, std::cout, std::cerr, canopy::cli::Environment::from_process());
}
