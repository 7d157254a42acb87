#pragma once
// Invocation: one run of the CLI. It holds the output streams, the Environment, the options every command
// takes (--json, --socket) and the connection to canopyd (the client library's, client/connection.h), opened on
// first use so that a command fails on its arguments before it touches the socket.
//
// Ownership: borrows the streams and the Environment, which outlive it; owns the Connection.
// Thread safety: one thread.

#include "cli/cli_error.h"
#include "cli/environment.h"
#include "client/connection.h"

#include <nlohmann/json.hpp>
#include <optional>
#include <ostream>
#include <string>

namespace canopy::cli {

class Invocation {
public:
    Invocation(std::ostream& out, std::ostream& err, const Environment& env) : out_(out), err_(err), env_(env) {}

    // Standard output for what a command prints for people: under -q it discards, and print_ids() writes the ids.
    std::ostream& out() noexcept { return quiet_ ? discard_ : out_; }
    // A stream that drops what is written to it.
    std::ostream& discard() noexcept { return discard_; }
    std::ostream& err() noexcept { return err_; }
    const Environment& env() const noexcept { return env_; }

    // --json: machine-readable output on stdout.
    bool& json() noexcept { return json_; }
    // --socket PATH as given; empty when not given.
    std::string& socket_option() noexcept { return socket_option_; }
    // -q: print only the ids of the tasks and buffers a command reports.
    bool& quiet() noexcept { return quiet_; }
    // Under -q: the "id" of each object of `items`, one per line, on stdout. Nothing otherwise.
    void print_ids(const nlohmann::json& items);

    // Connects on the first call (Environment::socket_path). Throws usage_error for a --socket path too long for a
    // socket, unreachable_error when nothing accepts on it.
    client::Connection& client();

    // Writes `value` as indented JSON and a newline on stdout.
    void print_json(const nlohmann::json& value);

    // Reports a failure: "canopy: CODE: message" on stderr and, under --json, {"error": {"code",
    // "message"}} on stdout. Returns the exit code for it.
    int report(const CliError& e);

private:
    std::ostream& out_;
    std::ostream& err_;
    const Environment& env_;
    bool json_ = false;
    bool quiet_ = false;
    std::string socket_option_;
    std::ostream discard_{nullptr};
    std::optional<client::Connection> client_;
};

} // namespace canopy::cli
