#include "cli/graph_run.h"

#include "cli/cli_error.h"

#include <ostream>

namespace canopy::cli {

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

json task_list(const std::vector<client::TaskState>& tasks) {
    json out = json::array();
    for (const auto& t : tasks) {
        out.push_back(t.json);
    }
    return out;
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

json run_graph(client::Connection& connection, const json& graph, bool wait, const Environment& env,
               std::ostream& err) {
    const client::Graph g = client::Graph::from_json(graph);
    if (!wait) {
        return task_list(connection.run(g).states());
    }
    const Clock::time_point start = Clock::now();
    bool drawn = false;
    client::Connection::ProgressHandler on_progress;
    if (env.stderr_is_tty) {
        on_progress = [&](const json& progress) {
            if (Clock::now() - start >= env.progress_after) {
                err << progress_line(progress) << std::flush;
                drawn = true;
            }
        };
    }
    const json tasks = task_list(connection.run_wait(g, on_progress));
    if (drawn) {
        err << "\n";
    }
    return tasks;
}

} // namespace canopy::cli
