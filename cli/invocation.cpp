#include "cli/invocation.h"

#include <ostream>

namespace canopy::cli {

Client& Invocation::client() {
    if (!client_) {
        client_.emplace(Client::connect(env_.socket_path(socket_option_)));
    }
    return *client_;
}

void Invocation::print_json(const nlohmann::json& value) {
    out_ << value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

int Invocation::report(const CliError& e) {
    err_ << "canopy: " << e.code() << ": " << e.what() << "\n";
    if (e.exit_code() == ExitCode::USAGE) {
        err_ << "Run with --help for more information.\n";
    }
    if (json_) {
        print_json({{"error", {{"code", e.code()}, {"message", e.what()}}}});
    }
    return static_cast<int>(e.exit_code());
}

} // namespace canopy::cli
