#pragma once
// CliError: every failure of the canopy CLI, carrying the process exit code and an error code.
//
// The exit codes are the CLI's public surface (docs/cli.md): 0 success, 1 a request or task
// failed, 2 usage error, 3 daemon unreachable. `code` is the daemon's error code (docs/control-protocol.md)
// for a failed request, or one of the CLI's own: USAGE, UNREACHABLE, PROTOCOL_ERROR.
//
// Thread safety: plain values.

#include <stdexcept>
#include <string>
#include <utility>

namespace canopy::cli {

enum class ExitCode : int { OK = 0, FAILED = 1, USAGE = 2, UNREACHABLE = 3 };

class CliError : public std::runtime_error {
public:
    CliError(ExitCode exit_code, std::string code, const std::string& message)
        : std::runtime_error(message), exit_code_(exit_code), code_(std::move(code)) {}

    ExitCode exit_code() const noexcept { return exit_code_; }
    const std::string& code() const noexcept { return code_; }

private:
    ExitCode exit_code_;
    std::string code_;
};

// A bad argument; the message names it ("--in \"x\": ..."). Exit 2.
inline CliError usage_error(const std::string& message) {
    return CliError(ExitCode::USAGE, "USAGE", message);
}

// The daemon's socket cannot be connected to; the message names the path and the errno text. Exit 3.
inline CliError unreachable_error(const std::string& message) {
    return CliError(ExitCode::UNREACHABLE, "UNREACHABLE", message);
}

// The stream broke or a reply does not follow docs/control-protocol.md. Exit 1.
inline CliError protocol_error(const std::string& message) {
    return CliError(ExitCode::FAILED, "PROTOCOL_ERROR", message);
}

// The daemon refused a request (`code` from its reply) or a task failed. Exit 1.
inline CliError request_error(const std::string& code, const std::string& message) {
    return CliError(ExitCode::FAILED, code, message);
}

} // namespace canopy::cli
