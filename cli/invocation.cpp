#include "cli/invocation.h"

#include "cli/table.h"

#include <ostream>

namespace canopy::cli {

client::Connection& Invocation::client() {
    if (client_) {
        return *client_;
    }
    const std::string path = env_.socket_path(socket_option_);
    try {
        client_.emplace(client::Connection::connect(path));
    } catch (const std::invalid_argument& e) {
        throw usage_error("--socket \"" + path + "\": " + e.what());
    } catch (const client::ConnectError& e) {
        throw unreachable_error(std::string(e.what()) + " (is canopyd running? set --socket or CANOPY_SOCKET)");
    }
    return *client_;
}

void Invocation::print_json(const nlohmann::json& value) {
    out_ << value.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

void Invocation::print_ids(const nlohmann::json& items) {
    if (!quiet_ || !items.is_array()) {
        return;
    }
    for (const auto& item : items) {
        const auto id = item.is_object() ? item.value("id", nlohmann::json()) : nlohmann::json();
        if (id.is_string()) {
            out_ << id.get<std::string>() << "\n";
        } else if (id.is_number_unsigned() || id.is_number_integer()) {
            out_ << id.dump() << "\n";
        }
    }
}

int Invocation::report(const CliError& e) {
    // The message may carry the daemon's text, or a path or value the user gave.
    err_ << "canopy: " << e.code() << ": " << printable(e.what()) << "\n";
    if (e.exit_code() == ExitCode::USAGE) {
        err_ << "Run with --help for more information.\n";
    }
    if (json_) {
        print_json({{"error", {{"code", e.code()}, {"message", e.what()}}}});
    }
    return static_cast<int>(e.exit_code());
}

} // namespace canopy::cli
