// The commands about the daemon itself: status, worker restart, metrics, shutdown, module load.

#include "cli/commands.h"
#include "cli/render.h"
#include "cli/requests.h"
#include "cli/table.h"

#include <memory>
#include <ostream>

namespace canopy::cli {

namespace {

using nlohmann::json;

// Exit 0 when every worker of the tree is running, 1 when any is not (starting, restarting, dead, stopped).
int status(Invocation& inv) {
    const client::Status status = inv.client().status();
    if (inv.json()) {
        inv.print_json(status.json);
    } else {
        inv.out() << render_status(status.json);
    }
    return status.all_running() ? 0 : 1;
}

int worker_restart(Invocation& inv, const std::string& worker) {
    inv.client().restart_worker(worker);
    if (inv.json()) {
        inv.print_json({{"worker", worker}});
    } else {
        inv.out() << "worker " << worker << " restarts\n";
    }
    return 0;
}

int metrics(Invocation& inv) {
    const std::string s = inv.client().metrics();
    if (inv.json()) {
        inv.print_json({{"text", s}});
        return 0;
    }
    inv.out() << s << (s.empty() || s.back() == '\n' ? "" : "\n");
    return 0;
}

int shutdown(Invocation& inv) {
    inv.client().shutdown();
    if (inv.json()) {
        inv.print_json(json::object());
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
        return request_error("BAD_REQUEST", "module " + args.name + ": FILE \"" + args.file +
                                                "\" makes a request of about " + std::to_string(request_bytes) +
                                                " bytes (base64 adds a third), over canopyd's frame limit (" +
                                                e.what() + "); raise control.max_frame_bytes in canopyd's config " +
                                                "(at most 64 MiB) or load a smaller module");
    }
    if (e.code() == "PROTOCOL_ERROR" && request_bytes > DEFAULT_MAX_FRAME_BYTES) {
        return protocol_error(std::string(e.what()) + " (the request is about " + std::to_string(request_bytes) +
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
        chips += (chips.empty() ? "" : ", ") + printable(chip.is_string() ? chip.get<std::string>() : chip.dump());
    }
    return "module " + field_text(module, "name") + " (" + field_text(module, "format") + ", " +
           field_text(module, "bytes") + " bytes) on " + (chips.empty() ? "-" : chips);
}

int module_load(Invocation& inv, const ModuleArgs& args) {
    const ModuleImage image = module_image(args.file, args.format);
    // The request's size: the image as base64 (a third more) and the few members around it.
    const std::size_t request_bytes = (image.data.size() + 2) / 3 * 4 + args.name.size() + image.format.size() + 64;
    client::ModuleInfo module;
    try {
        module = inv.client().load_module(args.name, std::as_bytes(std::span(image.data)), image.format);
    } catch (const client::Error& e) {
        throw module_load_error(request_error(e.code_name(), e.what()), args, request_bytes);
    } catch (const client::ProtocolError& e) {
        throw module_load_error(protocol_error(e.what()), args, request_bytes);
    }
    if (inv.json()) {
        inv.print_json({{"module", module.json}});
    } else {
        inv.out() << "loaded " << module_summary(module.json) << "\n";
    }
    return 0;
}

int module_list(Invocation& inv) {
    const std::vector<client::ModuleInfo> modules = inv.client().modules();
    json listed = json::array();
    for (const auto& m : modules) {
        listed.push_back(m.json);
    }
    if (inv.json()) {
        inv.print_json({{"modules", listed}});
        return 0;
    }
    if (modules.empty()) {
        inv.out() << "no modules loaded\n";
    }
    for (const auto& m : listed) {
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
