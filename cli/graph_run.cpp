#include "cli/graph_run.h"

#include "cli/cli_error.h"

#include <map>
#include <ostream>
#include <thread>

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

// Brings every unfinished task of `states` up to date from one `tasks` listing.
void poll_once(Client& client, json& states) {
    std::map<std::string, json> listed;
    for (const auto& t : task_list(client.call({{"op", "tasks"}}), "tasks")) {
        listed[t["id"].dump()] = t;
    }
    for (auto& state : states) {
        if (is_finished(state)) {
            continue;
        }
        const auto it = listed.find(state["id"].dump());
        if (it != listed.end()) {
            state = it->second;
            continue;
        }
        const json task = client.call({{"op", "wait"}, {"task_id", state["id"]}}).value("task", json());
        if (!task.is_object()) {
            throw protocol_error("the reply to \"wait\" has no \"task\" object");
        }
        state = task;
    }
}

bool all_finished(const json& states) {
    for (const auto& s : states) {
        if (!is_finished(s)) {
            return false;
        }
    }
    return true;
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

std::string progress_line(const json& tasks) {
    std::size_t done = 0;
    std::size_t failed = 0;
    for (const auto& t : tasks) {
        done += is_finished(t) ? std::size_t{1} : std::size_t{0};
        failed += is_failure(t) ? std::size_t{1} : std::size_t{0};
    }
    return "\r[" + std::to_string(done) + "/" + std::to_string(tasks.size()) + "] done, " + std::to_string(failed) +
           " failed";
}

json run_graph(Client& client, const json& graph, bool wait, const Environment& env, std::ostream& err) {
    json states = task_list(client.call({{"op", "run"}, {"graph", graph}, {"wait", false}}), "run");
    if (!wait) {
        return states;
    }
    const Clock::time_point start = Clock::now();
    bool drawn = false;
    for (bool first = true; !all_finished(states); first = false) {
        if (!first) {
            std::this_thread::sleep_for(env.poll_interval);
        }
        poll_once(client, states);
        if (env.stderr_is_tty && Clock::now() - start >= env.progress_after) {
            err << progress_line(states) << std::flush;
            drawn = true;
        }
    }
    if (drawn) {
        err << "\n";
    }
    return states;
}

} // namespace canopy::cli
