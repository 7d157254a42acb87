#include "cli/graph_run.h"

#include "cli/cli_error.h"

#include <ostream>

namespace canopy::cli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

json task_list(const json& reply, const char* op) {
    const json tasks = reply.value("tasks", json());
    if (!tasks.is_array()) {
        throw protocol_error(std::string("the reply to \"") + op + "\" has no \"tasks\" array");
    }
    for (const auto& t : tasks) {
        if (!t.is_object() || !t.contains("id")) {
            throw protocol_error(std::string("the reply to \"") + op + "\" lists a task without an id");
        }
    }
    return tasks;
}

} // namespace

bool is_finished(const json& task) {
    const json state = task.is_object() ? task.value("state", json()) : json();
    return state == "completed" || state == "failed" || state == "rejected";
}

bool is_failure(const json& task) {
    const json state = task.is_object() ? task.value("state", json()) : json();
    return state == "failed" || state == "rejected";
}

std::string progress_line(const json& progress) {
    const auto count = [&](const char* key) {
        const json n = progress.is_object() ? progress.value(key, json()) : json();
        return n.is_number_integer() && n.get<std::int64_t>() >= 0 ? n.get<std::uint64_t>() : std::uint64_t{0};
    };
    return "\r[" + std::to_string(count("done")) + "/" + std::to_string(count("total")) + "] done, " +
           std::to_string(count("failed")) + " failed";
}

json run_graph(Client& client, const json& graph, bool wait, const Environment& env, std::ostream& err) {
    if (!wait) {
        return task_list(client.call({{"op", "run"}, {"graph", graph}, {"wait", false}}), "run");
    }
    const Clock::time_point start = Clock::now();
    bool drawn = false;
    const json reply = client.call({{"op", "run"}, {"graph", graph}, {"wait", true}, {"progress", env.stderr_is_tty}},
                                   [&](const json& progress) {
                                       if (env.stderr_is_tty && Clock::now() - start >= env.progress_after) {
                                           err << progress_line(progress) << std::flush;
                                           drawn = true;
                                       }
                                   });
    if (drawn) {
        err << "\n";
    }
    return task_list(reply, "run");
}

} // namespace canopy::cli
