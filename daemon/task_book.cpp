#include "daemon/task_book.h"

#include "daemon/json_codec.h"

#include <algorithm>

namespace canopy::daemon {

void append_task_json(std::string& out, const TaskRecord& t) {
    out += "{\"name\":";
    append_json_string(out, t.name);
    out += ",\"id\":";
    out += std::to_string(t.id);
    out += ",\"kernel\":";
    append_json_string(out, t.kernel);
    out += ",\"on\":";
    append_json_string(out, t.on);
    out += ",\"state\":";
    append_json_string(out, t.state);
    out += ",\"submitted_ns\":";
    out += std::to_string(t.submitted_ns);
    out += ",\"start_ns\":";
    out += std::to_string(t.start_ns);
    out += ",\"end_ns\":";
    out += std::to_string(t.end_ns);
    if (t.state == "failed" || t.state == "rejected") {
        out += ",\"error\":{\"code\":";
        append_json_string(out, error_code_name(t.code));
        out += ",\"message\":";
        append_json_string(out, t.message);
        out += '}';
    }
    out += '}';
}

nlohmann::json task_json(const TaskRecord& t) {
    std::string text;
    append_task_json(text, t);
    return nlohmann::json::parse(text);
}

TaskRecord& TaskBook::add(TaskRecord record) {
    const auto id = record.id;
    return live_.emplace(id, std::move(record)).first->second;
}

TaskRecord* TaskBook::find(std::uint64_t id) {
    if (auto it = live_.find(id); it != live_.end()) {
        return &it->second;
    }
    if (auto it = done_.find(id); it != done_.end()) {
        return &it->second;
    }
    return nullptr;
}

std::vector<std::function<void()>> TaskBook::finish(std::uint64_t id, const std::string& state, ErrorCode code,
                                                    std::string message, std::uint64_t start_ns, std::uint64_t end_ns) {
    auto it = live_.find(id);
    if (it == live_.end()) {
        return {};
    }
    TaskRecord record = std::move(it->second);
    live_.erase(it);
    record.state = state;
    record.code = code;
    record.message = std::move(message);
    record.start_ns = start_ns;
    record.end_ns = end_ns;
    record.request.reset();
    if (auto waiter = std::move(record.waiter)) {
        append_task_json(waiter->states[record.position], record);
        waiter->failed += state == "completed" ? std::size_t{0} : std::size_t{1};
        if (--waiter->remaining > 0 && waiter->progress) {
            const auto now = std::chrono::steady_clock::now();
            if (now - waiter->last_progress >= TaskWaiter::PROGRESS_INTERVAL) {
                waiter->last_progress = now;
                const std::size_t total = waiter->states.size();
                waiter->reply(Response::progress(
                    {{"done", total - waiter->remaining}, {"failed", waiter->failed}, {"total", total}}));
            }
        }
        if (waiter->remaining == 0) {
            std::size_t bytes = 16;
            for (const auto& text : waiter->states) {
                bytes += text.size() + 1;
            }
            std::string members;
            members.reserve(bytes);
            members += waiter->single ? "\"task\":" : "\"tasks\":[";
            for (std::size_t i = 0; i < waiter->states.size(); ++i) {
                members += i == 0 ? "" : ",";
                members += waiter->states[i];
            }
            members += waiter->single ? "" : "]";
            waiter->reply(Response::members(std::move(members)));
        }
    }
    std::vector<std::function<void()>> callbacks;
    if (!record.on_finish.empty()) {
        auto text = std::make_shared<std::string>();
        append_task_json(*text, record);
        for (auto& cb : record.on_finish) {
            callbacks.push_back([cb = std::move(cb), text] { cb(*text); });
        }
        record.on_finish.clear();
    }
    if (!record.listed) {
        return callbacks; // the daemon's own step: no history
    }
    done_.emplace(id, std::move(record));
    done_order_.push_back(id);
    while (done_order_.size() > history_) {
        done_.erase(done_order_.front());
        done_order_.pop_front();
    }
    return callbacks;
}

std::string TaskBook::list_members() const {
    std::vector<const TaskRecord*> all;
    all.reserve(live_.size() + done_order_.size());
    for (const auto& [id, t] : live_) {
        if (t.listed) {
            all.push_back(&t);
        }
    }
    for (const auto id : done_order_) {
        if (const TaskRecord& t = done_.at(id); t.listed) {
            all.push_back(&t);
        }
    }
    std::sort(all.begin(), all.end(), [](const TaskRecord* a, const TaskRecord* b) { return a->id < b->id; });
    std::string out = "\"tasks\":[";
    out.reserve(out.size() + all.size() * 192 + 1);
    for (std::size_t i = 0; i < all.size(); ++i) {
        if (i > 0) {
            out += ',';
        }
        append_task_json(out, *all[i]);
    }
    out += ']';
    return out;
}

std::vector<std::uint64_t> TaskBook::unfinished_ids() const {
    std::vector<std::uint64_t> ids;
    for (const auto& [id, t] : live_) {
        ids.push_back(id);
    }
    std::sort(ids.begin(), ids.end());
    return ids;
}

} // namespace canopy::daemon
