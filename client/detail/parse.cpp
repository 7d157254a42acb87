#include "client/detail/parse.h"

namespace canopy::client::detail {

namespace {

using nlohmann::json;

std::string text(const json& object, const char* key) {
    const auto it = object.find(key);
    return it != object.end() && it->is_string() ? it->get<std::string>() : std::string();
}

std::uint64_t unsigned_value(const json& object, const char* key) {
    const auto it = object.find(key);
    return it != object.end() && it->is_number_unsigned() ? it->get<std::uint64_t>() : 0;
}

std::int64_t signed_value(const json& object, const char* key) {
    const auto it = object.find(key);
    return it != object.end() && it->is_number_integer() ? it->get<std::int64_t>() : 0;
}

std::vector<std::string> strings(const json& object, const char* key) {
    std::vector<std::string> out;
    const auto it = object.find(key);
    if (it != object.end() && it->is_array()) {
        for (const auto& s : *it) {
            if (s.is_string()) {
                out.push_back(s.get<std::string>());
            }
        }
    }
    return out;
}

TaskStatus status_of(const std::string& state) {
    if (state == "running") {
        return TaskStatus::RUNNING;
    }
    if (state == "completed") {
        return TaskStatus::COMPLETED;
    }
    if (state == "failed") {
        return TaskStatus::FAILED;
    }
    if (state == "rejected") {
        return TaskStatus::REJECTED;
    }
    return TaskStatus::QUEUED;
}

} // namespace

const json& object_member(const json& reply, const char* key, std::string_view op) {
    const auto it = reply.find(key);
    if (it == reply.end() || !it->is_object()) {
        throw ProtocolError("the reply to \"" + std::string(op) + "\" has no \"" + key + "\" object");
    }
    return *it;
}

const json& array_member(const json& reply, const char* key, std::string_view op) {
    const auto it = reply.find(key);
    if (it == reply.end() || !it->is_array()) {
        throw ProtocolError("the reply to \"" + std::string(op) + "\" has no \"" + key + "\" array");
    }
    return *it;
}

TaskState parse_task(const json& task, std::string_view op) {
    if (!task.is_object() || !task.contains("id") || !task["id"].is_number_unsigned()) {
        throw ProtocolError("the reply to \"" + std::string(op) + "\" lists a task without an id");
    }
    TaskState t;
    t.id = task["id"].get<std::uint64_t>();
    t.name = text(task, "name");
    t.kernel = text(task, "kernel");
    t.on = text(task, "on");
    t.status = status_of(text(task, "state"));
    if (const auto error = task.find("error"); error != task.end() && error->is_object()) {
        t.error_code_name = text(*error, "code");
        t.error_code = error_code_from_name(t.error_code_name);
        t.error_message = text(*error, "message");
    }
    t.submitted_ns = unsigned_value(task, "submitted_ns");
    t.start_ns = unsigned_value(task, "start_ns");
    t.end_ns = unsigned_value(task, "end_ns");
    t.json = task;
    return t;
}

std::vector<TaskState> parse_tasks(const json& reply, std::string_view op) {
    std::vector<TaskState> out;
    for (const auto& t : array_member(reply, "tasks", op)) {
        out.push_back(parse_task(t, op));
    }
    return out;
}

BufferInfo parse_buffer(const json& buffer, std::string_view op) {
    if (!buffer.is_object() || !buffer.contains("id") || !buffer["id"].is_string()) {
        throw ProtocolError("the reply to \"" + std::string(op) + "\" lists a buffer without an id");
    }
    BufferInfo b;
    b.id = buffer["id"].get<std::string>();
    b.backend = text(buffer, "backend");
    b.nbytes = unsigned_value(buffer, "nbytes");
    b.access = text(buffer, "access");
    b.device = unsigned_value(buffer, "device");
    b.world = strings(buffer, "world");
    b.name = text(buffer, "name");
    b.creator = text(buffer, "creator");
    if (const auto owner = buffer.find("owner_uid"); owner != buffer.end() && owner->is_number_unsigned()) {
        b.owner_uid = owner->get<std::uint32_t>();
    }
    b.json = buffer;
    return b;
}

Status parse_status(const json& reply) {
    Status s;
    if (const auto node = reply.find("node"); node != reply.end() && node->is_object()) {
        s.node_name = text(*node, "name");
        s.level = static_cast<int>(signed_value(*node, "level"));
    }
    s.pid = signed_value(reply, "pid");
    if (const auto up = reply.find("uptime_s"); up != reply.end() && up->is_number()) {
        s.uptime_s = up->get<double>();
    }
    if (const auto workers = reply.find("workers"); workers != reply.end() && workers->is_array()) {
        for (const auto& w : *workers) {
            if (!w.is_object()) {
                continue;
            }
            WorkerInfo info;
            info.path = text(w, "path");
            info.kind = text(w, "kind");
            info.backend = text(w, "backend");
            info.state = text(w, "state");
            info.pid = signed_value(w, "pid");
            info.restarts = unsigned_value(w, "restarts");
            info.tasks_done = unsigned_value(w, "tasks_done");
            info.tasks_failed = unsigned_value(w, "tasks_failed");
            info.json = w;
            s.workers.push_back(std::move(info));
        }
    }
    s.json = reply;
    return s;
}

ModuleInfo parse_module(const json& module) {
    ModuleInfo m;
    m.name = text(module, "name");
    m.bytes = unsigned_value(module, "bytes");
    m.format = text(module, "format");
    m.chips = strings(module, "chips");
    m.json = module;
    return m;
}

} // namespace canopy::client::detail
