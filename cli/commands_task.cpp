// The task commands: submit, run, wait, tasks.

#include "cli/commands.h"
#include "cli/graph_run.h"
#include "cli/render.h"
#include "cli/requests.h"
#include "cli/table.h"
#include "cli/units.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <ostream>

namespace canopy::cli {

namespace {

using nlohmann::json;

std::string task_label(const json& task) {
    return "task " + field_text(task, "name") + " (id " + field_text(task, "id") + ")";
}

void report_task_failure(Invocation& inv, const json& task) {
    const json error = task.value("error", json::object());
    const std::string code = error.is_object() ? field_text(error, "code") : "-";
    const json message = error.is_object() ? error.value("message", json("")) : json("");
    inv.err() << "canopy: " << code << ": " << task_label(task) << " " << field_text(task, "state") << ": "
              << printable(message.is_string() ? message.get<std::string>() : message.dump()) << "\n";
}

// Collects the tensor options in command-line order across --in, --out and --inout.
std::vector<TensorOption> tensors_in_order(const CLI::App& cmd, const std::vector<const CLI::Option*>& options) {
    std::map<const CLI::Option*, std::size_t> used;
    std::vector<TensorOption> out;
    for (const CLI::Option* opt : cmd.parse_order()) {
        if (std::find(options.begin(), options.end(), opt) != options.end()) {
            const std::size_t i = used[opt]++;
            out.emplace_back("--" + opt->get_single_name(), opt->results().at(i));
        }
    }
    return out;
}

int submit(Invocation& inv, const SubmitArgs& args) {
    const client::Task task = client::Task::from_json(submit_task(args));
    if (args.wait) {
        return finish_task(inv, inv.client().submit_wait(task).json);
    }
    return finish_task(inv, inv.client().submit(task).state().json);
}

json jsons_of(const std::vector<client::TaskState>& tasks) {
    json out = json::array();
    for (const auto& t : tasks) {
        out.push_back(t.json);
    }
    return out;
}

// True for a failure caused by another task: DEPENDENCY_FAILED, or a graph's "not run" rejection.
bool is_secondary_failure(const json& task) {
    const json error = task.value("error", json());
    if (!error.is_object()) {
        return false;
    }
    const json message = error.value("message", json());
    return error.value("code", json()) == "DEPENDENCY_FAILED" ||
           (message.is_string() && message.get<std::string>().rfind("not run:", 0) == 0);
}

// The failure to name on stderr: the first task that failed on its own, else the first that failed.
const json* first_cause(const json& tasks) {
    const json* first = nullptr;
    for (const auto& t : tasks) {
        if (!is_failure(t)) {
            continue;
        }
        if (!is_secondary_failure(t)) {
            return &t;
        }
        first = first ? first : &t;
    }
    return first;
}

struct RunArgs {
    std::string graph_file;
    bool wait = false;
};

int run(Invocation& inv, const RunArgs& args) {
    const json graph = load_graph_file(args.graph_file);
    const json tasks = run_graph(inv.client(), graph, args.wait, inv.env(), inv.err());
    if (inv.json()) {
        inv.print_json({{"tasks", tasks}});
    } else {
        inv.out() << render_tasks(tasks);
        inv.print_ids(tasks);
    }
    const json* cause = first_cause(tasks);
    if (cause == nullptr) {
        return 0;
    }
    std::size_t failed = 0;
    for (const auto& t : tasks) {
        failed += is_failure(t) ? std::size_t{1} : std::size_t{0};
    }
    report_task_failure(inv, *cause);
    if (failed > 1) {
        inv.err() << "canopy: " << failed << " of " << tasks.size() << " tasks did not complete\n";
    }
    return 1;
}

json parse_task_id(const std::string& text) {
    std::uint64_t id = 0;
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), id);
    if (text.empty() || ec != std::errc() || end != text.data() + text.size()) {
        throw usage_error("TASK_ID \"" + text + "\": expected a task id (a non-negative integer)");
    }
    return id;
}

struct WaitArgs {
    std::vector<std::string> ids;
    std::optional<std::string> timeout; // --timeout as given
};

// One id: the task as `submit --wait` prints it. Several: the table of them, as `run --wait` prints it.
int wait(Invocation& inv, const WaitArgs& args) {
    json ids = json::array();
    for (const auto& text : args.ids) {
        ids.push_back(parse_task_id(text));
    }
    std::optional<std::chrono::milliseconds> timeout;
    if (args.timeout) {
        timeout = std::chrono::milliseconds(parse_duration_ms(*args.timeout, "--timeout"));
    }
    const client::WaitResult reply = inv.client().wait(ids.get<std::vector<std::uint64_t>>(), timeout);
    const bool timed_out = reply.timed_out;
    const json tasks = jsons_of(reply.tasks);
    if (inv.json()) {
        inv.print_json(ids.size() == 1 ? tasks[0] : json{{"tasks", tasks}, {"timed_out", timed_out}});
    } else {
        inv.out() << render_tasks(tasks);
        inv.print_ids(tasks);
    }
    if (timed_out) {
        std::size_t unfinished = 0;
        for (const auto& t : tasks) {
            unfinished += is_finished(t) ? std::size_t{0} : std::size_t{1};
        }
        inv.err() << "canopy: TIMEOUT: " << unfinished << " of " << tasks.size() << " tasks had not finished after "
                  << args.timeout.value_or("?") << "\n";
        return 1;
    }
    if (const json* cause = first_cause(tasks)) {
        report_task_failure(inv, *cause);
        return 1;
    }
    return 0;
}

// Prints what became of each task; exits 1 when one was running and could not be stopped.
int cancel(Invocation& inv, const std::vector<std::string>& id_texts) {
    json ids = json::array();
    for (const auto& text : id_texts) {
        ids.push_back(parse_task_id(text));
    }
    json tasks = json::array();
    for (const auto& outcome : inv.client().cancel(ids.get<std::vector<std::uint64_t>>())) {
        tasks.push_back(outcome.task.json);
    }
    if (inv.json()) {
        inv.print_json({{"tasks", tasks}});
    }
    int rc = 0;
    json cancelled = json::array();
    for (const auto& t : tasks) {
        const std::string outcome = t.is_object() ? t.value("cancel", "") : "";
        const std::string label = task_label(t);
        std::ostream& human = inv.json() ? inv.discard() : inv.out();
        if (outcome == "cancelled") {
            cancelled.push_back(t);
            human << "cancelled " << label << "\n";
        } else if (outcome == "finished") {
            human << label << " had already finished (" << field_text(t, "state") << ")\n";
        } else {
            inv.err() << "canopy: " << label << " is running; its worker cannot stop it, so it will finish\n";
            rc = 1;
        }
    }
    if (!inv.json()) {
        inv.print_ids(cancelled);
    }
    return rc;
}

int tasks(Invocation& inv) {
    const json listed = jsons_of(inv.client().tasks());
    if (inv.json()) {
        inv.print_json({{"tasks", listed}});
    } else {
        inv.out() << render_tasks(listed);
        inv.print_ids(listed);
    }
    return 0;
}

// The storage CLI11 fills for `submit`; SubmitArgs is built from it after parsing.
struct SubmitOptions {
    SubmitArgs args;
    std::vector<std::string> in;
    std::vector<std::string> out;
    std::vector<std::string> inout;
};

void add_submit(CLI::App& app, Invocation& inv, Action& action) {
    CLI::App* cmd = app.add_subcommand("submit", "submit one task");
    add_common_options(*cmd, inv);
    auto opts = std::make_shared<SubmitOptions>();
    cmd->add_option("KERNEL", opts->args.kernel, "kernel name")->required();
    cmd->add_option("--on", opts->args.on, "worker that runs it (chip0, /node0/chip1, sub0)")
        ->type_name("WORKER")
        ->required();
    const std::vector<const CLI::Option*> tensor_options = {
        cmd->add_option("--in", opts->in, "tensor the kernel reads: BUFFER_ID:DTYPE:SHAPE[:STRIDES[:OFFSET]]")
            ->type_name("SPEC")
            ->allow_extra_args(false),
        cmd->add_option("--out", opts->out, "tensor the kernel writes (SPEC as for --in)")
            ->type_name("SPEC")
            ->allow_extra_args(false),
        cmd->add_option("--inout", opts->inout, "tensor the kernel reads and writes (SPEC as for --in)")
            ->type_name("SPEC")
            ->allow_extra_args(false)};
    cmd->add_option("--scalar", opts->args.scalars, "scalar after the tensors: float32:V, float64:V or int64:V")
        ->type_name("TYPE:VALUE")
        ->allow_extra_args(false);
    cmd->add_option("--param", opts->args.params,
                    "module kernels: the kind of each parameter in order (tensor, float32, float64, int64)")
        ->type_name("KIND")
        ->allow_extra_args(false)
        ->check(CLI::IsMember({"tensor", "float32", "float64", "int64"}));
    cmd->add_option("--grid", opts->args.grid, "module kernels: grid shape X[,Y[,Z]]")->type_name("X[,Y,Z]");
    cmd->add_option("--block", opts->args.block, "module kernels: block shape X[,Y[,Z]]")->type_name("X[,Y,Z]");
    cmd->add_option("--shared", opts->args.shared, "module kernels: dynamic shared memory per block, bytes")
        ->type_name("N");
    cmd->add_flag("--tf32", opts->args.tf32, "float32 matmul: allow TF32 tensor cores (10-bit operands)");
    cmd->add_flag("--wait", opts->args.wait, "reply when the task has finished");
    cmd->callback([&inv, &action, opts, cmd, tensor_options] {
        opts->args.tensors = tensors_in_order(*cmd, tensor_options);
        action = [&inv, opts] { return submit(inv, opts->args); };
    });
}

} // namespace

int finish_task(Invocation& inv, const json& task) {
    if (inv.json()) {
        inv.print_json(task);
    } else {
        inv.out() << render_tasks(json::array({task}));
        inv.print_ids(json::array({task}));
    }
    if (!is_failure(task)) {
        return 0;
    }
    report_task_failure(inv, task);
    return 1;
}

void add_task_commands(CLI::App& app, Invocation& inv, Action& action) {
    add_submit(app, inv, action);

    CLI::App* run_cmd = app.add_subcommand("run", "run a graph of tasks from a JSON file");
    add_common_options(*run_cmd, inv);
    auto run_args = std::make_shared<RunArgs>();
    run_cmd->add_option("GRAPH", run_args->graph_file, "graph file: {\"tasks\": [TASK...]}")->required();
    run_cmd->add_flag("--wait", run_args->wait, "wait until every task has finished, showing progress");
    run_cmd->callback([&inv, &action, run_args] { action = [&inv, run_args] { return run(inv, *run_args); }; });

    CLI::App* wait_cmd = app.add_subcommand("wait", "wait until tasks have finished");
    add_common_options(*wait_cmd, inv);
    auto wait_args = std::make_shared<WaitArgs>();
    wait_cmd->add_option("TASK_ID", wait_args->ids, "task ids")->required();
    auto timeout_text = std::make_shared<std::string>();
    CLI::Option* timeout =
        wait_cmd->add_option("--timeout", *timeout_text, "give up after this long (500ms, 30s, 5m, 2h) and exit 1");
    timeout->type_name("DURATION");
    wait_cmd->callback([&inv, &action, wait_args, timeout, timeout_text] {
        if (timeout->count() > 0) {
            wait_args->timeout = *timeout_text;
        }
        action = [&inv, wait_args] { return wait(inv, *wait_args); };
    });

    CLI::App* cancel_cmd = app.add_subcommand("cancel", "cancel queued tasks (their dependents fail too)");
    add_common_options(*cancel_cmd, inv);
    auto cancel_ids = std::make_shared<std::vector<std::string>>();
    cancel_cmd->add_option("TASK_ID", *cancel_ids, "task ids")->required();
    cancel_cmd->callback(
        [&inv, &action, cancel_ids] { action = [&inv, cancel_ids] { return cancel(inv, *cancel_ids); }; });

    CLI::App* tasks_cmd = app.add_subcommand("tasks", "list unfinished and recently finished tasks");
    add_common_options(*tasks_cmd, inv);
    tasks_cmd->callback([&inv, &action] { action = [&inv] { return tasks(inv); }; });
}

} // namespace canopy::cli
