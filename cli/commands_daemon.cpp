// The commands about the daemon itself: status, metrics, shutdown, module load.

#include "cli/commands.h"
#include "cli/render.h"
#include "cli/requests.h"

#include <memory>
#include <ostream>

namespace canopy::cli {

namespace {

using nlohmann::json;

int status(Invocation& inv) {
    const json reply = inv.client().call({{"op", "status"}});
    if (inv.json()) {
        inv.print_json(reply);
    } else {
        inv.out() << render_status(reply);
    }
    return 0;
}

int metrics(Invocation& inv) {
    const json reply = inv.client().call({{"op", "metrics"}});
    if (inv.json()) {
        inv.print_json(reply);
        return 0;
    }
    const json text = reply.value("text", json(""));
    const std::string s = text.is_string() ? text.get<std::string>() : text.dump();
    inv.out() << s << (s.empty() || s.back() == '\n' ? "" : "\n");
    return 0;
}

int shutdown(Invocation& inv) {
    const json reply = inv.client().call({{"op", "shutdown"}});
    if (inv.json()) {
        inv.print_json(reply);
    } else {
        inv.out() << "canopyd at " << inv.client().socket_path() << " is shutting down\n";
    }
    return 0;
}

struct ModuleArgs {
    std::string name;
    std::string file;
    std::string format;
};

int module_load(Invocation& inv, const ModuleArgs& args) {
    const json request = module_load_request(args.name, args.file, args.format);
    const json reply = inv.client().call(request);
    if (inv.json()) {
        inv.print_json(reply);
    } else {
        inv.out() << "loaded module " << args.name << " (" << request["format"].get<std::string>() << ")\n";
    }
    return 0;
}

} // namespace

void add_common_options(CLI::App& command, Invocation& inv) {
    command.add_flag("--json", inv.json(), "print the reply as JSON on stdout");
    command
        .add_option("--socket", inv.socket_option(),
                    std::string("control socket of canopyd (default: $CANOPY_SOCKET, else ") + DEFAULT_SOCKET + ")")
        ->type_name("PATH");
}

void add_daemon_commands(CLI::App& app, Invocation& inv, Action& action) {
    CLI::App* status_cmd = app.add_subcommand("status", "show the daemon and its worker tree");
    add_common_options(*status_cmd, inv);
    status_cmd->callback([&inv, &action] { action = [&inv] { return status(inv); }; });

    CLI::App* metrics_cmd = app.add_subcommand("metrics", "print the daemon's metrics (Prometheus text)");
    add_common_options(*metrics_cmd, inv);
    metrics_cmd->callback([&inv, &action] { action = [&inv] { return metrics(inv); }; });

    CLI::App* shutdown_cmd = app.add_subcommand("shutdown", "stop the daemon as on SIGTERM");
    add_common_options(*shutdown_cmd, inv);
    shutdown_cmd->callback([&inv, &action] { action = [&inv] { return shutdown(inv); }; });

    CLI::App* module_cmd = app.add_subcommand("module", "manage kernel modules");
    module_cmd->require_subcommand(1);
    CLI::App* load = module_cmd->add_subcommand("load", "load a PTX or cubin module under NAME");
    auto args = std::make_shared<ModuleArgs>();
    load->add_option("NAME", args->name, "module name")->required();
    load->add_option("FILE", args->file, "a .ptx or .cubin file")->required();
    load->add_option("--format", args->format, "ptx or cubin (default: by extension, then by content)")
        ->type_name("FORMAT")
        ->check(CLI::IsMember({"ptx", "cubin"}));
    add_common_options(*load, inv);
    load->callback([&inv, &action, args] { action = [&inv, args] { return module_load(inv, *args); }; });
}

} // namespace canopy::cli
