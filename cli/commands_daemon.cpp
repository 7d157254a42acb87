// The commands about the daemon itself: status, worker restart, metrics, shutdown, module load.

#include "cli/commands.h"
#include "cli/render.h"
#include "cli/requests.h"

#include <memory>
#include <ostream>

namespace canopy::cli {

namespace {

using nlohmann::json;

// Exit 0 when every worker of the tree is running, 1 when any is not (starting, restarting, dead, stopped).
int status(Invocation& inv) {
    const json reply = inv.client().call({{"op", "status"}});
    if (inv.json()) {
        inv.print_json(reply);
    } else {
        inv.out() << render_status(reply);
    }
    const json workers = reply.value("workers", json::array());
    for (const json& w : workers) {
        if (!w.is_object() || w.value("state", std::string()) != "running") {
            return 1;
        }
    }
    return 0;
}

int worker_restart(Invocation& inv, const std::string& worker) {
    const json reply = inv.client().call({{"op", "worker.restart"}, {"worker", worker}});
    if (inv.json()) {
        inv.print_json(reply);
    } else {
        inv.out() << "worker " << worker << " restarts\n";
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

// control.max_frame_bytes when the config leaves it out.
constexpr std::size_t DEFAULT_MAX_FRAME_BYTES = 1u << 20;

struct ModuleArgs {
    std::string name;
    std::string file;
    std::string format;
};

// A refusal of the module itself names the file; a frame the daemon refused as too large names the limit and
// the config key that raises it, since the whole image travels in one frame.
CliError module_load_error(const CliError& e, const ModuleArgs& args, std::size_t request_bytes) {
    if (e.code() == "BAD_REQUEST" && std::string(e.what()).rfind("frame length ", 0) == 0) {
        return request_error("BAD_REQUEST", "module " + args.name + ": FILE \"" + args.file + "\" makes a request of " +
                                                std::to_string(request_bytes) +
                                                " bytes (base64 adds a third), over canopyd's frame limit (" +
                                                e.what() + "); raise control.max_frame_bytes in canopyd's config " +
                                                "(at most 64 MiB) or load a smaller module");
    }
    if (e.code() == "PROTOCOL_ERROR" && request_bytes > DEFAULT_MAX_FRAME_BYTES) {
        return protocol_error(std::string(e.what()) + " (the request is " + std::to_string(request_bytes) +
                              " bytes, over canopyd's default frame limit of " +
                              std::to_string(DEFAULT_MAX_FRAME_BYTES) + ": control.max_frame_bytes)");
    }
    if (e.code() == "BAD_REQUEST") {
        return request_error(e.code(), "FILE \"" + args.file + "\": " + e.what());
    }
    return e;
}

std::string module_summary(const json& module) {
    std::string chips;
    for (const auto& chip : module.value("chips", json::array())) {
        chips += (chips.empty() ? "" : ", ") + (chip.is_string() ? chip.get<std::string>() : chip.dump());
    }
    return "module " + field_text(module, "name") + " (" + field_text(module, "format") + ", " +
           field_text(module, "bytes") + " bytes) on " + (chips.empty() ? "-" : chips);
}

int module_load(Invocation& inv, const ModuleArgs& args) {
    const json request = module_load_request(args.name, args.file, args.format);
    const std::size_t request_bytes = request.dump().size();
    json reply;
    try {
        reply = inv.client().call(request);
    } catch (const CliError& e) {
        throw module_load_error(e, args, request_bytes);
    }
    if (inv.json()) {
        inv.print_json(reply);
    } else {
        inv.out() << "loaded " << module_summary(reply.value("module", json::object())) << "\n";
    }
    return 0;
}

int module_list(Invocation& inv) {
    const json reply = inv.client().call({{"op", "module.list"}});
    if (inv.json()) {
        inv.print_json(reply);
        return 0;
    }
    const json modules = reply.value("modules", json::array());
    if (modules.empty()) {
        inv.out() << "no modules loaded\n";
    }
    for (const auto& m : modules) {
        inv.out() << module_summary(m) << "\n";
    }
    return 0;
}

} // namespace

void add_common_options(CLI::App& command, Invocation& inv) {
    command.add_flag("--json", inv.json(), "print the reply as JSON on stdout");
    command.add_flag("-q,--quiet", inv.quiet(), "print only the ids of the tasks and buffers reported");
    command
        .add_option("--socket", inv.socket_option(),
                    std::string("control socket of canopyd (default: $CANOPY_SOCKET, else ") + DEFAULT_SOCKET + ")")
        ->type_name("PATH");
}

void add_daemon_commands(CLI::App& app, Invocation& inv, Action& action) {
    CLI::App* status_cmd = app.add_subcommand("status", "show the daemon and its worker tree");
    add_common_options(*status_cmd, inv);
    status_cmd->callback([&inv, &action] { action = [&inv] { return status(inv); }; });

    CLI::App* worker_cmd = app.add_subcommand("worker", "manage workers");
    worker_cmd->require_subcommand(1);
    CLI::App* restart = worker_cmd->add_subcommand(
        "restart", "restart WORKER: a dead one comes back with a fresh restart budget, a live one is killed first");
    auto worker = std::make_shared<std::string>();
    restart->add_option("WORKER", *worker, "worker path, e.g. chip0 or /node0/sub1")->required();
    add_common_options(*restart, inv);
    restart->callback([&inv, &action, worker] { action = [&inv, worker] { return worker_restart(inv, *worker); }; });

    CLI::App* metrics_cmd = app.add_subcommand("metrics", "print the daemon's metrics (Prometheus text)");
    add_common_options(*metrics_cmd, inv);
    metrics_cmd->callback([&inv, &action] { action = [&inv] { return metrics(inv); }; });

    CLI::App* shutdown_cmd = app.add_subcommand("shutdown", "stop the daemon as on SIGTERM");
    add_common_options(*shutdown_cmd, inv);
    shutdown_cmd->callback([&inv, &action] { action = [&inv] { return shutdown(inv); }; });

    CLI::App* module_cmd = app.add_subcommand("module", "manage kernel modules");
    module_cmd->require_subcommand(1);
    CLI::App* load =
        module_cmd->add_subcommand("load", "load a PTX, cubin or fatbin module under NAME into every cuda chip");
    auto args = std::make_shared<ModuleArgs>();
    load->add_option("NAME", args->name, "module name: [A-Za-z_][A-Za-z0-9_]{0,39}")->required();
    load->add_option("FILE", args->file, "a .ptx, .cubin or .fatbin file")->required();
    load->add_option("--format", args->format, "ptx, cubin or fatbin (default: by extension, then by content)")
        ->type_name("FORMAT")
        ->check(CLI::IsMember({"ptx", "cubin", "fatbin"}));
    add_common_options(*load, inv);
    load->callback([&inv, &action, args] { action = [&inv, args] { return module_load(inv, *args); }; });
    CLI::App* list = module_cmd->add_subcommand("list", "list the loaded modules");
    add_common_options(*list, inv);
    list->callback([&inv, &action] { action = [&inv] { return module_list(inv); }; });
}

} // namespace canopy::cli
