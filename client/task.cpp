#include "client/task.h"

namespace canopy::client {

using nlohmann::json;

json View::to_json() const {
    json view = {{"buffer", buffer}, {"dtype", dtype}, {"shape", shape}};
    if (!strides.empty()) {
        view["strides"] = strides;
    }
    if (byte_offset) {
        view["byte_offset"] = *byte_offset;
    }
    return view;
}

Task::Task(std::string kernel, std::string on)
    : json_({{"kernel", std::move(kernel)}, {"on", std::move(on)}, {"args", json::array()}}) {}

Task Task::from_json(json task) {
    Task t;
    t.json_ = std::move(task);
    return t;
}

Task& Task::name(const std::string& name) {
    json_["name"] = name;
    return *this;
}

Task& Task::tensor(const View& view, const char* tag) {
    json_["args"].push_back({{"tensor", view.to_json()}, {"tag", tag}});
    return *this;
}

Task& Task::scalar(const Scalar& scalar) {
    json_["args"].push_back({{"scalar", scalar.value}});
    return *this;
}

Task& Task::launch(json launch) {
    json_["launch"] = std::move(launch);
    return *this;
}

Task& Task::params(std::vector<std::string> kinds) {
    json_["params"] = std::move(kinds);
    return *this;
}

Graph Graph::from_json(json graph) {
    Graph g;
    g.json_ = std::move(graph);
    return g;
}

Graph& Graph::add(const Task& task) {
    json_["tasks"].push_back(task.to_json());
    return *this;
}

} // namespace canopy::client
