#include "daemon/service.h"
#include "scheduler/checks.h"
#include "worker/worker_loop.h"

#include <memory>
#include <set>

namespace canopy::daemon {
namespace {

namespace asio = boost::asio;

using nlohmann::json;

struct Rejection {
    ErrorCode code;
    std::string message;
};

// "where: message", unless the message already names `where`.
std::string prefixed(const std::string& where, const std::string& message) {
    return message.rfind(where, 0) == 0 ? message : where + ": " + message;
}

// Name, kernel and worker of a task that did not parse, taken from its JSON where present.
void describe_unparsed(const json& t, std::size_t index, ParsedTask& out) {
    auto text = [&](const char* key) {
        return t.is_object() && t.contains(key) && t[key].is_string() ? t[key].get<std::string>() : std::string();
    };
    if (out.name.empty()) {
        out.name = text("name").empty() ? "task" + std::to_string(index) : text("name");
    }
    if (out.request.kernel.empty()) {
        out.request.kernel = text("kernel");
    }
    if (out.request.worker.empty()) {
        out.request.worker = text("on");
    }
}

} // namespace

void Service::handle_run(const json& request, Reply reply, bool single) {
    std::vector<const json*> task_json_list;
    if (single) {
        task_json_list.push_back(&member(request, "task", "request"));
    } else {
        const json& graph = member(request, "graph", "request");
        const json& tasks = member(graph, "tasks", "graph");
        if (!tasks.is_array() || tasks.empty()) {
            throw RequestError(ErrorCode::BAD_REQUEST, "graph.tasks: expected a non-empty array");
        }
        task_json_list.reserve(tasks.size());
        for (const json& t : tasks) {
            task_json_list.push_back(&t);
        }
    }
    const bool wait = request.contains("wait") && request["wait"].is_boolean() && request["wait"].get<bool>();
    const auto resolver = [this](const std::string& id, const std::string& where) { return resolve_buffer(id, where); };

    // Parse and check every task before any is queued: a graph runs whole or not at all.
    std::vector<ParsedTask> parsed(task_json_list.size());
    std::vector<std::optional<Rejection>> rejected(task_json_list.size());
    std::set<std::string> names;
    bool any_rejected = false;
    for (std::size_t i = 0; i < task_json_list.size(); ++i) {
        const std::string where = single ? "task" : "tasks[" + std::to_string(i) + "]";
        try {
            parsed[i] = parse_task(*task_json_list[i], resolver, where);
            if (!names.insert(parsed[i].name).second) {
                throw RequestError(ErrorCode::BAD_REQUEST,
                                   where + ": task name '" + parsed[i].name + "' is used twice in the graph");
            }
            supervisor_.check(parsed[i].request);
            scheduler::check_no_overlapping_writes(parsed[i].request.args.tensors);
            parsed[i].request.timeout = config_.supervision.task_timeout;
        } catch (const RequestError& e) {
            rejected[i] = Rejection{e.code(), prefixed(where, e.what())};
        } catch (const WireError& e) {
            rejected[i] = Rejection{e.code(), prefixed(where, e.what())};
        }
        if (rejected[i]) {
            describe_unparsed(*task_json_list[i], i, parsed[i]);
        }
        any_rejected = any_rejected || rejected[i].has_value();
    }

    // A client that waits gets one reply when the last task finished (TaskBook::finish sends it).
    std::shared_ptr<TaskWaiter> waiter;
    if (wait && !any_rejected) {
        waiter = std::make_shared<TaskWaiter>();
        waiter->single = single;
        waiter->states.resize(parsed.size());
        waiter->remaining = parsed.size();
        waiter->reply = std::move(reply);
    }
    std::vector<std::uint64_t> ids;
    ids.reserve(parsed.size());
    std::vector<std::string> rejected_states(any_rejected ? parsed.size() : 0); // a big graph outlives history
    ReadyWork to_dispatch;
    {
        std::lock_guard lock(mu_);
        if (stopping_) {
            throw RequestError(ErrorCode::WORKER_DIED, "the daemon is stopping");
        }
        std::string first_bad;
        for (std::size_t i = 0; i < parsed.size() && first_bad.empty(); ++i) {
            if (rejected[i]) {
                first_bad = parsed[i].name;
            }
        }
        for (std::size_t i = 0; i < parsed.size(); ++i) {
            TaskRecord record;
            record.id = next_task_++;
            record.name = std::move(parsed[i].name);
            record.kernel = parsed[i].request.kernel;
            record.on = parsed[i].request.worker;
            record.submitted_ns = worker::monotonic_ns();
            ids.push_back(record.id);
            if (any_rejected) {
                book_.add(std::move(record));
                const Rejection r = rejected[i] ? *rejected[i]
                                                : Rejection{ErrorCode::BAD_REQUEST, "not run: task '" + first_bad +
                                                                                        "' of this graph was rejected"};
                book_.finish(ids.back(), "rejected", r.code, r.message, 0, 0);
                metrics_.task_finished("rejected", "", 0);
                append_task_json(rejected_states[i], *book_.find(ids.back()));
                continue;
            }
            parsed[i].request.id = record.id;
            record.request = std::move(parsed[i].request);
            record.waiter = waiter;
            record.position = static_cast<std::uint32_t>(i);
            TaskRecord& stored = book_.add(std::move(record));
            scheduler_.add(stored.id, stored.name, stored.request->args.tensors);
        }
        dispatch_ready_locked(to_dispatch);
        if (!waiter) {
            // States as of now; a task may already be running or finished. Read from the book while the
            // lock holds, since history past TaskBook::HISTORY is dropped.
            std::string list;
            for (std::size_t i = 0; i < ids.size(); ++i) {
                list += i == 0 ? "" : ",";
                if (any_rejected) {
                    list += rejected_states[i];
                } else {
                    append_task_json(list, *book_.find(ids[i]));
                }
            }
            if (any_rejected && single) {
                // A rejected single task is a failed request; a rejected graph is a successful request whose
                // tasks each say why they did not run.
                const auto& first = *std::find_if(rejected.begin(), rejected.end(), [](const auto& r) { return r; });
                reply(json{{"ok", false},
                           {"error", {{"code", error_code_name(first->code)}, {"message", first->message}}},
                           {"task", json::parse(list)}});
            } else {
                reply(Response::members(single ? "\"task\":" + list : "\"tasks\":[" + list + "]"));
            }
        }
    }
    dispatch(std::move(to_dispatch));
}

void Service::handle_wait(const json& request, Reply reply) {
    const std::uint64_t id = uint_member(request, "task_id", "request");
    std::lock_guard lock(mu_);
    TaskRecord* t = book_.find(id);
    if (t == nullptr) {
        throw RequestError(ErrorCode::BAD_REQUEST,
                           "no task " + std::to_string(id) + " (unknown, or finished too long ago to be remembered)");
    }
    if (t->finished()) {
        std::string members = "\"task\":";
        append_task_json(members, *t);
        reply(Response::members(std::move(members)));
        return;
    }
    t->on_finish.push_back([this, id, reply = std::move(reply)] {
        std::string members = "\"task\":";
        append_task_json(members, *book_.find(id));
        reply(Response::members(std::move(members)));
    });
}

// Moves every READY task out of the scheduler into `out`, marking it running. REQUIRES mu_.
void Service::dispatch_ready_locked(ReadyWork& out) {
    while (const auto id = scheduler_.pop_ready()) {
        TaskRecord* t = book_.find(*id);
        t->state = "running";
        if (t->local) {
            out.local.push_back(std::move(t->local));
            t->local = nullptr;
            continue;
        }
        out.requests.push_back(std::move(*t->request));
        t->request.reset();
    }
}

void Service::dispatch(ReadyWork work) {
    for (auto& request : work.requests) {
        const std::uint64_t id = request.id;
        supervisor_.submit(std::move(request), [this, id](TaskResult r) { post_result(id, std::move(r)); });
    }
    for (auto& step : work.local) {
        step();
    }
}

std::vector<std::function<void()>> Service::finish_locked(std::uint64_t id, const std::string& state, ErrorCode code,
                                                          const std::string& message, std::uint64_t start_ns,
                                                          std::uint64_t end_ns) {
    const TaskRecord* t = book_.find(id);
    // Metrics label workers by their path, whichever spelling the client used.
    const std::string worker = !t || t->on.empty() ? "" : (t->on.front() == '/' ? t->on : "/" + t->on);
    const double seconds = end_ns > start_ns ? static_cast<double>(end_ns - start_ns) * 1e-9 : 0.0;
    if (t == nullptr || t->listed) {
        metrics_.task_finished(state, worker, seconds);
    }
    return book_.finish(id, state, code, message, start_ns, end_ns);
}

void Service::on_result(std::uint64_t id, const TaskResult& result) {
    ReadyWork to_dispatch;
    {
        std::lock_guard lock(mu_);
        record_result_locked(id, result, to_dispatch);
    }
    dispatch(std::move(to_dispatch));
}

void Service::post_result(std::uint64_t id, TaskResult result) {
    bool first = false;
    {
        std::lock_guard lock(results_mu_);
        first = results_.empty();
        results_.emplace_back(id, std::move(result));
    }
    if (first) {
        asio::post(io_, [this] { drain_results(); });
    }
}

void Service::drain_results() {
    std::vector<std::pair<std::uint64_t, TaskResult>> batch;
    {
        std::lock_guard lock(results_mu_);
        batch.swap(results_);
    }
    ReadyWork to_dispatch;
    {
        std::lock_guard lock(mu_);
        for (const auto& [id, result] : batch) {
            record_result_locked(id, result, to_dispatch);
        }
    }
    dispatch(std::move(to_dispatch));
}

// Records a task's result, fails its dependents if it failed, moves newly ready tasks into `out` and runs
// the finished tasks' callbacks (they read the book, so under the lock; they only format and post
// replies). REQUIRES mu_.
void Service::record_result_locked(std::uint64_t id, const TaskResult& result, ReadyWork& out) {
    if (!scheduler_.state(id)) {
        return; // failed already (the daemon stopped)
    }
    std::vector<std::function<void()>> callbacks;
    if (result.ok()) {
        std::vector<scheduler::TaskId> now_ready;
        scheduler_.complete(id, now_ready);
        callbacks = finish_locked(id, "completed", ErrorCode::OK, {}, result.start_ns, result.end_ns);
    } else {
        std::vector<scheduler::FailedTask> dependents;
        scheduler_.fail(id, result.code, dependents);
        callbacks = finish_locked(id, "failed", result.code, result.message, result.start_ns, result.end_ns);
        for (const auto& [dependent, message] : dependents) {
            auto more = finish_locked(dependent, "failed", ErrorCode::DEPENDENCY_FAILED, message, 0, 0);
            callbacks.insert(callbacks.end(), more.begin(), more.end());
        }
    }
    if (!stopping_ || book_.unfinished() > 0) {
        dispatch_ready_locked(out);
    }
    for (auto& cb : callbacks) {
        cb();
    }
    if (book_.unfinished() == 0) {
        drained_.notify_all();
    }
}

} // namespace canopy::daemon
