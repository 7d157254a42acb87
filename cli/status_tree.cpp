// render_status (declared in cli/render.h): the daemon's worker tree as an indented table.

#include "cli/render.h"
#include "cli/table.h"
#include "cli/units.h"

#include <map>
#include <vector>

namespace canopy::cli {

namespace {

using nlohmann::json;

std::string normalize_path(std::string path) {
    if (path.empty() || path.front() != '/') {
        path.insert(path.begin(), '/');
    }
    while (path.size() > 1 && path.back() == '/') {
        path.pop_back();
    }
    return path;
}

std::string parent_path(const std::string& path) {
    const std::size_t slash = path.rfind('/');
    return slash == 0 || slash == std::string::npos ? "/" : path.substr(0, slash);
}

// The workers of a status reply arranged by parent; index ROOT stands for the supervisor ("/").
struct WorkerTree {
    static constexpr std::size_t ROOT = SIZE_MAX;
    std::vector<json> workers;
    std::vector<std::string> names;
    std::map<std::size_t, std::vector<std::size_t>> children;
    json root; // the entry whose path is "/", when the daemon lists one
};

WorkerTree build_tree(const json& list) {
    WorkerTree tree;
    std::map<std::string, std::size_t> by_path;
    std::vector<std::string> paths;
    if (list.is_array()) {
        for (const auto& w : list) {
            const json& p = w.is_object() && w.contains("path") ? w["path"] : json();
            const std::string path = normalize_path(p.is_string() ? p.get<std::string>() : "?");
            if (path == "/" && w.is_object()) {
                tree.root = w;
                continue;
            }
            by_path.emplace(path, tree.workers.size());
            paths.push_back(path);
            tree.names.push_back(path.substr(path.rfind('/') + 1));
            tree.workers.push_back(w.is_object() ? w : json::object());
        }
    }
    for (std::size_t i = 0; i < paths.size(); ++i) {
        std::string parent = parent_path(paths[i]);
        while (parent != "/" && by_path.find(parent) == by_path.end()) {
            parent = parent_path(parent);
        }
        tree.children[parent == "/" ? WorkerTree::ROOT : by_path[parent]].push_back(i);
    }
    return tree;
}

std::string device_text(const json& w) {
    const json b = w.value("backend", json());
    const std::string backend = b.is_string() ? b.get<std::string>() : "";
    return backend.empty() ? "-" : backend + ":" + field_text(w, "device");
}

std::string positive_or_dash(const json& w, const char* key) {
    const json v = w.value(key, json());
    return v.is_number_integer() && v.get<std::int64_t>() > 0 ? v.dump() : "-";
}

std::vector<std::string> worker_row(const std::string& label, const json& w) {
    const std::string state = field_text(w, "state");
    const json uptime = w.value("uptime_s", json());
    const bool running = state == "running";
    const json last_exit = w.value("last_exit", json());
    const std::string exit_text = !running && last_exit.is_string() ? last_exit.get<std::string>() : "";
    return {label,
            state,
            positive_or_dash(w, "pid"),
            device_text(w),
            field_text(w, "tasks_done"),
            field_text(w, "tasks_failed"),
            field_text(w, "restarts"),
            running && uptime.is_number() ? format_uptime(uptime.get<double>()) : "-",
            exit_text};
}

void add_subtree(Table& table, const WorkerTree& tree, std::size_t node, const std::string& indent) {
    const auto it = tree.children.find(node);
    if (it == tree.children.end()) {
        return;
    }
    const auto& kids = it->second;
    for (std::size_t k = 0; k < kids.size(); ++k) {
        const bool last = k + 1 == kids.size();
        const std::size_t i = kids[k];
        table.add_row(worker_row(indent + (last ? "└─ " : "├─ ") + tree.names[i], tree.workers[i]));
        add_subtree(table, tree, i, indent + (last ? "   " : "│  "));
    }
}

std::string header_line(const json& status) {
    const json node = status.value("node", json::object());
    const json uptime = status.value("uptime_s", json());
    std::string line = "node " + (node.is_object() ? field_text(node, "name") : "-");
    if (node.is_object() && node.contains("level")) {
        line += " (level " + field_text(node, "level") + ")";
    }
    line += ", canopyd pid " + field_text(status, "pid");
    if (uptime.is_number()) {
        line += ", up " + format_uptime(uptime.get<double>());
    }
    return line + "\n";
}

} // namespace

std::string render_status(const json& status) {
    if (!status.is_object()) {
        return "-\n";
    }
    const WorkerTree tree = build_tree(status.value("workers", json::array()));
    Table table({{"WORKER"},
                 {"STATE"},
                 {"PID", Table::Align::RIGHT},
                 {"DEVICE"},
                 {"DONE", Table::Align::RIGHT},
                 {"FAILED", Table::Align::RIGHT},
                 {"RESTARTS", Table::Align::RIGHT},
                 {"UPTIME", Table::Align::RIGHT},
                 {"LAST EXIT", Table::Align::LEFT, true}});
    if (tree.root.is_object()) {
        table.add_row(worker_row("/", tree.root));
    } else {
        const json uptime = status.value("uptime_s", json());
        table.add_row({"/", "running", positive_or_dash(status, "pid"), "-", "-", "-", "-",
                       uptime.is_number() ? format_uptime(uptime.get<double>()) : "-", ""});
    }
    add_subtree(table, tree, WorkerTree::ROOT, "");
    return header_line(status) + table.render();
}

} // namespace canopy::cli
