#include "client/connection.h"

#include "client/detail/channel.h"
#include "client/detail/parse.h"
#include "client/detail/wait_pool.h"
#include "protocol/base64.h"

#include <cstdlib>

namespace canopy::client {

namespace {

using detail::array_member;
using detail::object_member;
using nlohmann::json;

std::uint64_t unsigned_member(const json& reply, const char* key, std::string_view op) {
    const auto it = reply.find(key);
    if (it == reply.end() || !it->is_number_unsigned()) {
        throw ProtocolError("the reply to \"" + std::string(op) + "\" has no \"" + key + "\" count");
    }
    return it->get<std::uint64_t>();
}

json ids_json(const std::vector<std::uint64_t>& ids) {
    json out = json::array();
    for (const std::uint64_t id : ids) {
        out.push_back(id);
    }
    return out;
}

} // namespace

std::string default_socket_path() {
    const char* env = std::getenv("CANOPY_SOCKET");
    return env != nullptr && *env != '\0' ? std::string(env) : std::string(DEFAULT_SOCKET);
}

Connection Connection::connect(const std::string& socket_path) {
    return Connection(std::make_unique<detail::Channel>(detail::Channel::connect(socket_path)));
}

Connection::Connection(std::unique_ptr<detail::Channel> channel) : channel_(std::move(channel)) {}
Connection::Connection(Connection&&) noexcept = default;
Connection& Connection::operator=(Connection&&) noexcept = default;
Connection::~Connection() = default;

const std::string& Connection::socket_path() const noexcept {
    return channel_->path();
}

const std::shared_ptr<detail::WaitPool>& Connection::pool() {
    if (!pool_) {
        pool_ = std::make_shared<detail::WaitPool>(channel_->path());
    }
    return pool_;
}

json Connection::request(json request, const ProgressHandler& on_progress) {
    return channel_->call(std::move(request), {}, on_progress);
}

Status Connection::status() {
    return detail::parse_status(request({{"op", "status"}}));
}

void Connection::restart_worker(const std::string& worker) {
    request({{"op", "worker.restart"}, {"worker", worker}});
}

std::string Connection::metrics() {
    const json reply = request({{"op", "metrics"}});
    const auto text = reply.find("text");
    if (text == reply.end() || !text->is_string()) {
        throw ProtocolError("the reply to \"metrics\" has no \"text\" string");
    }
    return text->get<std::string>();
}

void Connection::shutdown() {
    request({{"op", "shutdown"}});
}

BufferInfo Connection::create_buffer(const BufferSpec& spec) {
    json r = {{"op", "buffer.create"}, {"bytes", spec.bytes}};
    if (!spec.backend.empty()) {
        r["backend"] = spec.backend;
    }
    if (!spec.on.empty()) {
        r["on"] = spec.on;
    }
    if (!spec.world.empty()) {
        r["world"] = spec.world;
    }
    if (!spec.access.empty()) {
        r["access"] = spec.access;
    }
    return detail::parse_buffer(object_member(request(std::move(r)), "buffer", "buffer.create"), "buffer.create");
}

std::vector<BufferInfo> Connection::list_buffers() {
    std::vector<BufferInfo> out;
    const json reply = request({{"op", "buffer.list"}});
    for (const auto& b : array_member(reply, "buffers", "buffer.list")) {
        out.push_back(detail::parse_buffer(b, "buffer.list"));
    }
    return out;
}

BufferInfo Connection::show_buffer(const std::string& id) {
    const json reply = request({{"op", "buffer.show"}, {"buffer", id}});
    return detail::parse_buffer(object_member(reply, "buffer", "buffer.show"), "buffer.show");
}

std::optional<std::string> Connection::release_buffer(const std::string& id) {
    const json reply = request({{"op", "buffer.release"}, {"buffer", id}});
    const auto warning = reply.find("warning");
    return warning != reply.end() && warning->is_string() ? std::optional(warning->get<std::string>()) : std::nullopt;
}

void Connection::write(const std::string& id, std::uint64_t offset, std::span<const std::byte> bytes) {
    const json reply = channel_->call(
        {{"op", "buffer.write"}, {"buffer", id}, {"offset", offset}, {"attachment", bytes.size()}}, bytes);
    const std::uint64_t written = unsigned_member(reply, "written", "buffer.write");
    if (written != bytes.size()) {
        throw ProtocolError("buffer.write of " + std::to_string(bytes.size()) + " bytes at offset " +
                            std::to_string(offset) + " replied written " + std::to_string(written));
    }
}

ReadResult Connection::read(const std::string& id, std::uint64_t offset, std::span<std::byte> into) {
    const json reply = request(
        {{"op", "buffer.read"}, {"buffer", id}, {"offset", offset}, {"bytes", into.size()}, {"attachment", true}});
    ReadResult result;
    result.bytes = unsigned_member(reply, "attachment", "buffer.read");
    result.rest = unsigned_member(reply, "rest", "buffer.read");
    result.cut_short = reply.value("short", false);
    if (result.bytes > into.size()) {
        throw ProtocolError("the reply to \"buffer.read\" announces " + std::to_string(result.bytes) +
                            " bytes for a read of " + std::to_string(into.size()));
    }
    channel_->receive_attachment(into.first(static_cast<std::size_t>(result.bytes)), "buffer.read");
    return result;
}

std::vector<std::byte> Connection::read(const std::string& id, std::uint64_t offset,
                                        std::optional<std::uint64_t> bytes) {
    json r = {{"op", "buffer.read"}, {"buffer", id}, {"offset", offset}, {"attachment", true}};
    if (bytes) {
        r["bytes"] = *bytes;
    }
    const json reply = request(std::move(r));
    const std::uint64_t n = unsigned_member(reply, "attachment", "buffer.read");
    if (bytes && n > *bytes) {
        throw ProtocolError("the reply to \"buffer.read\" announces " + std::to_string(n) + " bytes for a read of " +
                            std::to_string(*bytes));
    }
    std::vector<std::byte> out(static_cast<std::size_t>(n));
    channel_->receive_attachment(out, "buffer.read");
    return out;
}

BufferFds Connection::buffer_fds(const std::string& id, MapAccess access) {
    json reply;
    try {
        reply = request(
            {{"op", "buffer.fd"}, {"buffer", id}, {"access", access == MapAccess::READ ? "read" : "readwrite"}});
    } catch (...) {
        channel_->take_fds(); // a refusal carries none; nothing stays behind
        throw;
    }
    BufferFds out;
    out.fds = channel_->take_fds();
    out.buffer = detail::parse_buffer(object_member(reply, "buffer", "buffer.fd"), "buffer.fd");
    out.writable = reply.value("writable", false);
    const std::uint64_t announced = unsigned_member(reply, "fds", "buffer.fd");
    if (announced != out.fds.size()) {
        throw ProtocolError("the reply to \"buffer.fd\" announces " + std::to_string(announced) + " fds; " +
                            std::to_string(out.fds.size()) + " arrived");
    }
    return out;
}

BufferMapping Connection::map(const std::string& id, MapAccess access) {
    BufferFds handed = buffer_fds(id, access);
    const std::string& backend = handed.buffer.backend;
    if (backend != "posix_shm" && backend != "sim_vmm") {
        throw Error(ErrorCode::BAD_REQUEST, "buffer " + id + " is " + backend +
                                                ", device memory that this process cannot map; import its fds on "
                                                "its GPU (buffer_fds), or use write and read");
    }
    std::vector<int> fds;
    for (const auto& fd : handed.fds) {
        fds.push_back(fd.get());
    }
    return BufferMapping(std::move(handed.buffer), handed.writable, fds);
}

TaskFuture Connection::submit(const Task& task) {
    const json reply = request({{"op", "submit"}, {"task", task.to_json()}, {"wait", false}});
    return TaskFuture(pool(), detail::parse_task(object_member(reply, "task", "submit"), "submit"));
}

TaskState Connection::submit_wait(const Task& task) {
    const json reply = request({{"op", "submit"}, {"task", task.to_json()}, {"wait", true}});
    return detail::parse_task(object_member(reply, "task", "submit"), "submit");
}

GraphFuture Connection::run(const Graph& graph) {
    const json reply = request({{"op", "run"}, {"graph", graph.to_json()}, {"wait", false}});
    return GraphFuture(pool(), detail::parse_tasks(reply, "run"));
}

std::vector<TaskState> Connection::run_wait(const Graph& graph, const ProgressHandler& on_progress) {
    const json reply = request(
        {{"op", "run"}, {"graph", graph.to_json()}, {"wait", true}, {"progress", static_cast<bool>(on_progress)}},
        on_progress);
    return detail::parse_tasks(reply, "run");
}

WaitResult Connection::wait(const std::vector<std::uint64_t>& ids, std::optional<std::chrono::milliseconds> timeout) {
    json r = {{"op", "wait"}};
    if (ids.size() == 1) {
        r["task_id"] = ids.front();
    } else {
        r["task_ids"] = ids_json(ids);
    }
    if (timeout) {
        r["timeout_ms"] = timeout->count();
    }
    const json reply = request(std::move(r));
    WaitResult result;
    result.tasks = ids.size() == 1 ? std::vector{detail::parse_task(object_member(reply, "task", "wait"), "wait")}
                                   : detail::parse_tasks(reply, "wait");
    result.timed_out = reply.value("timed_out", false);
    return result;
}

std::vector<CancelOutcome> Connection::cancel(const std::vector<std::uint64_t>& ids) {
    const json reply = request({{"op", "cancel"}, {"task_ids", ids_json(ids)}});
    std::vector<CancelOutcome> out;
    for (const auto& t : array_member(reply, "tasks", "cancel")) {
        out.push_back({detail::parse_task(t, "cancel"), t.value("cancel", "")});
    }
    return out;
}

std::vector<TaskState> Connection::tasks() {
    return detail::parse_tasks(request({{"op", "tasks"}}), "tasks");
}

ModuleInfo Connection::load_module(const std::string& name, std::span<const std::byte> image,
                                   const std::string& format) {
    json r = {{"op", "module.load"}, {"name", name}};
    if (!format.empty()) {
        r["format"] = format;
    }
    r["data"] = base64_encode(std::string_view(reinterpret_cast<const char*>(image.data()), image.size()));
    return detail::parse_module(object_member(request(std::move(r)), "module", "module.load"));
}

std::vector<ModuleInfo> Connection::modules() {
    std::vector<ModuleInfo> out;
    const json reply = request({{"op", "module.list"}});
    for (const auto& m : array_member(reply, "modules", "module.list")) {
        out.push_back(detail::parse_module(m));
    }
    return out;
}

} // namespace canopy::client
