#include "daemon/service.h"
#include "scheduler/checks.h"
#include "worker/worker_loop.h"

#include <memory>
#include <set>
#include <string_view>
#include <unordered_set>

namespace canopy::daemon {
namespace {

namespace asio = boost::asio;

using nlohmann::json;

// While a checked graph is queued, its ready tasks go to their workers after every DISPATCH_STRIDE tasks (where
// there are checker threads): few enough that a chip starts early, enough that each dispatch takes a worker's
// lock for many tasks.
constexpr std::size_t DISPATCH_STRIDE = 16;

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

// The same for a task the fast path read; task_from_raw moved its strings only if it returned.
void describe_unparsed(const RawTask& t, std::size_t index, ParsedTask& out) {
    if (out.name.empty()) {
        out.name = t.name.empty() ? "task" + std::to_string(index) : t.name;
    }
    if (out.request.kernel.empty()) {
        out.request.kernel = t.kernel;
    }
    if (out.request.worker.empty()) {
        out.request.worker = t.on;
    }
}

} // namespace

void Service::handle_run(const json& request, RawRun* raw, Reply reply, bool single, const Peer& peer) {
    std::vector<const json*> task_json_list;
    if (raw != nullptr) {
        task_json_list.assign(raw->tasks.size(), nullptr);
    } else if (single) {
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

    // Parse and check every task before any is queued: a graph runs whole or not at all. Each task's checks read
    // nothing the others write, so a large graph's are spread over the checker threads; its names are compared
    // after, in graph order.
    const std::size_t count = task_json_list.size();
    std::vector<ParsedTask> parsed(count);
    std::vector<std::optional<Rejection>> rejected(count);
    std::vector<char> read(count, 0); // the task was read, so its name counts in the duplicate check
    const auto where_of = [single](std::size_t i) {
        return single ? std::string("task") : "tasks[" + std::to_string(i) + "]";
    };
    checkers_.for_each(count, [&](std::size_t i) {
        const std::string where = where_of(i);
        try {
            parsed[i] = raw != nullptr ? task_from_raw(raw->tasks[i], resolver, where)
                                       : parse_task(*task_json_list[i], resolver, where);
            read[i] = 1;
            supervisor_.check(parsed[i].request);
            parsed[i].request.signature_checked = true;
            for (const TensorArg& arg : parsed[i].request.args.tensors) {
                access_.require_owner(peer, arg.tensor.buffer.identity, where, "use in a task");
            }
            scheduler::check_no_overlapping_writes(parsed[i].request.args.tensors);
            parsed[i].request.timeout = config_.supervision.task_timeout;
        } catch (const RequestError& e) {
            rejected[i] = Rejection{e.code(), prefixed(where, e.what())};
        } catch (const WireError& e) {
            rejected[i] = Rejection{e.code(), prefixed(where, e.what())};
        }
    });
    // Views of parsed[i].name, which stays in place until the tasks are queued. A name used a second time is the
    // later task's error, whatever its checks said.
    std::unordered_set<std::string_view> names;
    names.reserve(count);
    bool any_rejected = false;
    for (std::size_t i = 0; i < count; ++i) {
        if (read[i] != 0 && !names.insert(parsed[i].name).second) {
            rejected[i] = Rejection{ErrorCode::BAD_REQUEST,
                                    where_of(i) + ": task name '" + parsed[i].name + "' is used twice in the graph"};
        }
        if (rejected[i] && raw != nullptr) {
            describe_unparsed(raw->tasks[i], i, parsed[i]);
        } else if (rejected[i]) {
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
        waiter->progress =
            request.contains("progress") && request["progress"].is_boolean() && request["progress"].get<bool>();
        waiter->last_progress = std::chrono::steady_clock::now();
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
            // A copy across hosts runs on a remote node's link, never on a chip's stream.
            const std::uint32_t lane = supervisor_.crosses_hosts(*record.request)
                                           ? scheduler::NO_LANE
                                           : supervisor_.lane(record.request->worker);
            record.ordered = lane != scheduler::NO_LANE;
            TaskRecord& stored = book_.add(std::move(record));
            scheduler_.add(stored.id, stored.name, stored.request->args.tensors, lane);
            // The whole graph passed its checks, so with CPUs to spare its first tasks go to their workers while
            // the rest are still being queued: a chip starts after DISPATCH_STRIDE tasks, not after the graph.
            // On fewer than 4 CPUs the workers would take the control thread's CPU, and the graph is queued first.
            if (early_dispatch_ && (i + 1) % DISPATCH_STRIDE == 0) {
                dispatch_ready_locked(to_dispatch);
            }
        }
        dispatch_ready_locked(to_dispatch);
        if (!waiter) {
            // States as of now; a task may already be running or finished. Read from the book while the
            // lock holds, since history past TaskBook::HISTORY is dropped.
            std::string list;
            list.reserve(ids.size() * 160);
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

namespace {

// A `wait` on several tasks: their states by position, filled as each finishes; one reply, at the last one's
// finish or at the timeout, whichever comes first. Guarded by the Service's mu_.
struct MultiWait {
    std::vector<std::uint64_t> ids;
    std::vector<std::string> states; // empty until that task finished
    std::size_t remaining = 0;
    bool single = false; // "task_id": the reply holds "task"
    bool replied = false;
    Reply reply;
};

std::string wait_members(const MultiWait& w, bool timed_out) {
    std::string members = w.single ? "\"task\":" : "\"tasks\":[";
    for (std::size_t i = 0; i < w.states.size(); ++i) {
        members += i == 0 ? "" : ",";
        members += w.states[i];
    }
    members += w.single ? "" : "]";
    members += timed_out ? ",\"timed_out\":true" : ",\"timed_out\":false";
    return members;
}

// A task id as the wait and cancel requests take it, in `where`.
std::uint64_t task_id_of(const json& value, const std::string& where) {
    if (!value.is_number_unsigned()) {
        throw RequestError(ErrorCode::BAD_REQUEST, where + ": expected a task id (a non-negative integer)");
    }
    return value.get<std::uint64_t>();
}

// "task_id": N or "task_ids": [N, ...] (1 to MAX_WAIT_IDS, no id twice).
std::vector<std::uint64_t> task_ids_of(const json& request, bool& single) {
    constexpr std::size_t MAX_WAIT_IDS = 100000;
    single = request.contains("task_id");
    if (single == request.contains("task_ids")) {
        throw RequestError(ErrorCode::BAD_REQUEST, "request: expected \"task_id\" or \"task_ids\", not both");
    }
    if (single) {
        return {task_id_of(request["task_id"], "task_id")};
    }
    const json& list = request["task_ids"];
    if (!list.is_array() || list.empty() || list.size() > MAX_WAIT_IDS) {
        throw RequestError(ErrorCode::BAD_REQUEST,
                           "task_ids: expected an array of 1 to " + std::to_string(MAX_WAIT_IDS) + " task ids");
    }
    std::vector<std::uint64_t> ids;
    std::set<std::uint64_t> seen;
    for (std::size_t i = 0; i < list.size(); ++i) {
        ids.push_back(task_id_of(list[i], "task_ids[" + std::to_string(i) + "]"));
        if (!seen.insert(ids.back()).second) {
            throw RequestError(ErrorCode::BAD_REQUEST, "task_ids[" + std::to_string(i) + "]: task " +
                                                           std::to_string(ids.back()) + " is listed twice");
        }
    }
    return ids;
}

std::string unknown_task(std::uint64_t id) {
    return "no task " + std::to_string(id) +
           " (unknown, or finished longer ago than the daemon remembers: control.task_history)";
}

} // namespace

void Service::handle_wait(const json& request, Reply reply) {
    auto w = std::make_shared<MultiWait>();
    w->ids = task_ids_of(request, w->single);
    std::optional<std::chrono::milliseconds> timeout;
    if (request.contains("timeout_ms")) {
        constexpr std::uint64_t MAX_WAIT_TIMEOUT_MS = 86'400'000; // a day
        const std::uint64_t ms = uint_member(request, "timeout_ms", "request");
        if (ms > MAX_WAIT_TIMEOUT_MS) {
            throw RequestError(ErrorCode::BAD_REQUEST, "request.timeout_ms: at most " +
                                                           std::to_string(MAX_WAIT_TIMEOUT_MS) + " (a day), got " +
                                                           std::to_string(ms));
        }
        timeout = std::chrono::milliseconds(ms);
    }
    w->states.resize(w->ids.size());
    w->reply = std::move(reply);
    std::lock_guard lock(mu_);
    for (const std::uint64_t id : w->ids) {
        const TaskRecord* t = book_.find(id);
        if (t == nullptr || !t->listed) {
            throw RequestError(ErrorCode::BAD_REQUEST, unknown_task(id));
        }
    }
    for (std::size_t i = 0; i < w->ids.size(); ++i) {
        TaskRecord* t = book_.find(w->ids[i]);
        if (t->finished()) {
            append_task_json(w->states[i], *t);
            continue;
        }
        ++w->remaining;
        t->on_finish.push_back([w, i](const std::string& state) {
            if (w->replied) {
                return;
            }
            w->states[i] = state;
            if (--w->remaining == 0) {
                w->replied = true;
                w->reply(Response::members(wait_members(*w, false)));
            }
        });
    }
    if (w->remaining == 0) {
        w->replied = true;
        w->reply(Response::members(wait_members(*w, false)));
        return;
    }
    if (timeout) {
        // At the timeout, the tasks not finished are listed as they are then. A timer that fires after the reply
        // does nothing.
        auto timer = std::make_shared<boost::asio::steady_timer>(io_, *timeout);
        timer->async_wait([this, w, timer](const boost::system::error_code& ec) {
            if (ec) {
                return;
            }
            std::lock_guard timer_lock(mu_);
            if (w->replied) {
                return;
            }
            for (std::size_t i = 0; i < w->ids.size(); ++i) {
                if (w->states[i].empty()) {
                    if (const TaskRecord* t = book_.find(w->ids[i])) {
                        append_task_json(w->states[i], *t);
                    }
                }
            }
            w->replied = true;
            w->reply(Response::members(wait_members(*w, true)));
        });
    }
}

// Fails each queued task named (and its dependents) with CANCELLED; a running task cannot be stopped by its
// worker and finishes, which the reply says. Every id is checked before anything is cancelled.
json Service::handle_cancel(const json& request, const Peer& peer) {
    bool single = false;
    const std::vector<std::uint64_t> ids = task_ids_of(request, single);
    std::vector<json> outcomes;
    ReadyWork to_dispatch;
    std::vector<std::function<void()>> callbacks;
    {
        std::lock_guard lock(mu_);
        for (const std::uint64_t id : ids) {
            const TaskRecord* t = book_.find(id);
            if (t == nullptr || !t->listed) {
                throw RequestError(ErrorCode::BAD_REQUEST, unknown_task(id));
            }
        }
        const std::string by =
            "cancelled by uid " + std::to_string(peer.uid) + " (pid " + std::to_string(peer.pid) + ")";
        for (const std::uint64_t id : ids) {
            const TaskRecord* t = book_.find(id);
            const auto state = scheduler_.state(id);
            std::string outcome;
            if (t->finished()) {
                outcome = "finished";
            } else if (state && *state != scheduler::TaskState::RUNNING) {
                std::vector<scheduler::FailedTask> dependents;
                scheduler_.fail(id, ErrorCode::CANCELLED, dependents);
                auto done = finish_locked(id, "failed", ErrorCode::CANCELLED, by, 0, 0);
                callbacks.insert(callbacks.end(), done.begin(), done.end());
                for (const auto& [dependent, message] : dependents) {
                    auto more = finish_locked(dependent, "failed", ErrorCode::DEPENDENCY_FAILED, message, 0, 0);
                    callbacks.insert(callbacks.end(), more.begin(), more.end());
                }
                outcome = "cancelled";
            } else {
                outcome = "running";
            }
            json entry = task_json(*book_.find(id));
            entry["cancel"] = outcome;
            outcomes.push_back(std::move(entry));
        }
        dispatch_ready_locked(to_dispatch);
        for (auto& cb : callbacks) {
            cb();
        }
        if (book_.unfinished() == 0) {
            drained_.notify_all();
        }
    }
    dispatch(std::move(to_dispatch));
    std::string listed;
    for (const auto& o : outcomes) {
        listed += (listed.empty() ? "" : ", ") + std::to_string(o["id"].get<std::uint64_t>()) + " " +
                  o["cancel"].get<std::string>();
    }
    log_->info("cancel requested by uid {} (pid {}): {}", peer.uid, peer.pid, listed);
    return {{"tasks", outcomes}};
}

// Takes every READY task out of the scheduler, marking it running: a task for a worker goes to the supervisor
// now, with the tasks its lane orders it after; a step of the daemon's own goes to `out`. REQUIRES mu_.
void Service::dispatch_ready_locked(ReadyWork& out) {
    std::vector<std::pair<TaskRequest, TaskCallback>> batch;
    while (const auto id = scheduler_.pop_ready()) {
        TaskRecord* t = book_.find(*id);
        t->state = "running";
        if (t->local) {
            out.local.push_back(std::move(t->local));
            t->local = nullptr;
            continue;
        }
        TaskRequest request = std::move(*t->request);
        t->request.reset();
        if (t->ordered) {
            scheduler_.ordered_after(*id, request.after);
            request.keep_failure = true;
        }
        batch.emplace_back(std::move(request), [this, id = *id](TaskResult r) { post_result(id, std::move(r)); });
    }
    if (batch.size() == 1) {
        supervisor_.submit(std::move(batch.front().first), std::move(batch.front().second));
    } else if (!batch.empty()) {
        supervisor_.submit_all(std::move(batch));
    }
}

void Service::dispatch(ReadyWork work) {
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
    if (!result.ok()) {
        // From here on no task ordered after it is dispatched: those not yet with the supervisor fail below.
        supervisor_.forget_failure(id);
    }
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
