// Supervisor lifecycle: the zygote and its standby, spawning, exits, restarts with back-off, deaths marked
// and logged, task deadlines, and the stop.
#include "daemon/supervisor.h"

#include "daemon/zygote.h"
#include "ipc/fd_passing.h"
#include "ipc/sys_error.h"

#include <algorithm>
#include <cstring>
#include <signal.h>
#include <spdlog/sinks/null_sink.h>
#include <spdlog/spdlog.h>
#include <sys/socket.h>
#include <sys/wait.h>

namespace canopy::daemon {
namespace {

using Steady = std::chrono::steady_clock;

// A child (or zygote) that stayed up this long counts as healthy again: its next death starts the back-off over.
constexpr auto HEALTHY_UPTIME = std::chrono::seconds(30);

void deliver(std::vector<std::pair<TaskCallback, TaskResult>>& results) {
    for (auto& [done, result] : results) {
        if (done) {
            done(std::move(result));
        }
    }
    results.clear();
}

std::shared_ptr<spdlog::logger> pick_logger(const SupervisorOptions& options) {
    if (options.log) {
        return options.log;
    }
    if (auto registered = spdlog::get("daemon")) {
        return registered;
    }
    return std::make_shared<spdlog::logger>("daemon", std::make_shared<spdlog::sinks::null_sink_mt>());
}

std::string tasks_phrase(std::size_t n) {
    return n == 0 ? std::string() : "; " + std::to_string(n) + (n == 1 ? " task" : " tasks") + " failed";
}

std::unique_ptr<ChildLauncher> make_launcher(const SupervisorOptions& options,
                                             const std::function<std::unique_ptr<ChildLauncher>(ChildMain)>& factory) {
    ChildMain child_main = [opts = options](const SpawnRequest& request, ipc::UniqueFd mailbox, ipc::UniqueFd control) {
        return run_child(opts, request, std::move(mailbox), std::move(control));
    };
    if (factory) {
        return factory(std::move(child_main));
    }
    return std::make_unique<Zygote>(std::move(child_main), options.standby_zygote);
}

} // namespace

Supervisor::Supervisor(SupervisorOptions options, SupervisorSeams seams)
    : options_(std::move(options)), arenas_(map_preloads()),
      clock_(seams.clock ? std::move(seams.clock) : std::make_shared<const SteadyClock>()),
      launcher_(make_launcher(options_, std::move(seams.launcher))), buffers_(options_.state_dir / "journal"),
      log_(pick_logger(options_)),
      policy_(options_.restart_budget, options_.backoff_initial, options_.backoff_max, HEALTHY_UPTIME),
      zygote_since_(clock_->now()), modules_(buffers_, options_.path, module_host()) {
    const RecoveryReport recovered = buffers_.journal().recover();
    for (const std::string& name : recovered.unlinked) {
        log_->warn("{}: unlinked shm object {}, left behind by an earlier run", options_.path, name);
    }
    for (const auto& [name, why] : recovered.failed) {
        log_->error("{}: could not unlink shm object {} left by an earlier run: {}", options_.path, name, why);
    }
    for (const ArenaView& arena : arenas_.views) {
        buffers_.register_arena(arena.name, arena.backend, arena.base, arena.length);
    }
    for (std::size_t i = 0; i < options_.children.size(); ++i) {
        auto slot = std::make_unique<ChildSlot>();
        slot->index = static_cast<std::uint32_t>(i);
        slot->spec = options_.children[i];
        slot->path = options_.child_path(slot->spec.name);
        slots_.push_back(std::move(slot));
    }
}

MappedArenas Supervisor::map_preloads() {
    MappedArenas mapped = map_arenas(options_.preload);
    if (!mapped.views.empty()) {
        options_ = with_arenas(options_, mapped.views);
    }
    return mapped;
}

void Supervisor::notify_events() {
    events_.bump();
}

void Supervisor::changed() const {
    if (on_change_) {
        on_change_();
    }
}

Supervisor::~Supervisor() {
    stop();
}

void Supervisor::start() {
    event_thread_ = std::thread([this] { event_loop(); });
    housekeeping_thread_ = std::thread([this] { housekeeping_loop(); });
    for (auto& slot : slots_) {
        spawn(*slot);
    }
    const auto deadline = Steady::now() + options_.ready_timeout;
    // A remote node whose host did not answer its first attempt does not hold the start up: its link keeps
    // trying with back-off while the rest of the tree serves.
    const auto waiting_for_host = [](const ChildSlot& s) {
        return s.spec.kind == ChildKind::REMOTE && s.state == WorkerState::RESTARTING && s.restarts > 0;
    };
    auto settled = [&] {
        return std::all_of(slots_.begin(), slots_.end(), [&](const auto& s) {
            std::lock_guard slot_lock(s->mu);
            return s->state == WorkerState::RUNNING || s->state == WorkerState::DEAD || waiting_for_host(*s);
        });
    };
    for (;;) {
        const std::uint32_t seen = events_.value();
        if (settled() || Steady::now() >= deadline) {
            break;
        }
        events_.wait_until(seen, deadline);
    }
    std::string failed;
    for (const auto& s : slots_) {
        std::lock_guard slot_lock(s->mu);
        if (waiting_for_host(*s)) {
            log_->warn("remote node {} is not reachable yet ({}); its link keeps trying with back-off", s->path,
                       s->last_exit);
        } else if (s->state != WorkerState::RUNNING) {
            failed += (failed.empty() ? "" : "; ") + s->path + " is " + to_string(s->state) +
                      (s->last_exit.empty() ? "" : " (" + s->last_exit + ")");
        }
    }
    if (!failed.empty()) {
        throw std::runtime_error("children did not come up: " + failed);
    }
}

void Supervisor::spawn(ChildSlot& slot) {
    auto inc = std::make_unique<Incarnation>();
    Incarnation* raw = inc.get();
    std::uint32_t generation = 0;
    bool start_failed = false;
    {
        std::lock_guard lock(slot.mu);
        if (stopping_ || slot.live) {
            return;
        }
        try {
            inc->mailbox = std::make_unique<ipc::MailboxParent>(slot.generation + 1);
            // A remote node's result comes after a network round trip, longer than the completion thread's spin.
            inc->mailbox->set_wake_waiter_on_submit(slot.spec.kind != ChildKind::REMOTE);
            // A node runs its frames on several workers at once: each result is taken when it comes.
            inc->mailbox->set_collect_in_any_order(slot.spec.kind == ChildKind::NODE ||
                                                   slot.spec.kind == ChildKind::REMOTE);
        } catch (const std::exception& e) {
            // Out of fds or memory: this start fails like a death, and the restart policy decides what next.
            slot.last_exit = std::string("could not be started: ") + e.what();
            const std::string line = after_death_locked(slot, EndCause::EXITED, -1, 0, {});
            log_->log(slot.state == WorkerState::DEAD ? spdlog::level::err : spdlog::level::warn, "{}", line);
            start_failed = true;
        }
        if (!start_failed) {
            generation = inc->generation = ++slot.generation;
            slot.state = WorkerState::STARTING;
            inc->spawned_at = clock_->now();
            inc->setting_up = true;
            slot.live = std::move(inc);
        }
    }
    if (start_failed) {
        notify_events(); // the housekeeping thread learns of the restart now due
        changed();
        return;
    }
    // Ends the setup below, after which any thread may end the incarnation (a zygote death, the child's exit, a
    // stop): `raw` must not be touched here after it.
    const auto set_up = [&slot, raw](std::uint32_t zygote_epoch) {
        {
            std::lock_guard lock(slot.mu);
            raw->zygote_epoch = zygote_epoch;
            raw->setting_up = false;
        }
        slot.setup_done.notify_all();
    };
    std::optional<ipc::UniqueFd> theirs;
    try {
        auto pair = ipc::seqpacket_pair();
        raw->control = std::move(pair.first);
        theirs = std::move(pair.second);
        raw->completion_thread = std::thread([this, &slot, raw] { completion_loop(slot, *raw); });
        raw->control_thread = std::thread([this, &slot, raw] { control_loop(slot, *raw); });
    } catch (const std::exception& e) {
        // Out of fds or threads: the child does not start, and the daemon keeps running.
        set_up(0);
        end_incarnation(slot, std::string("could not be started: ") + e.what(), EndCause::EXITED, generation);
        return;
    }
    std::uint32_t zygote_epoch = 0;
    try {
        zygote_epoch = launcher_->request_spawn({slot.index, generation}, raw->mailbox->fd(), theirs->get());
    } catch (const std::exception& e) {
        // The zygote is gone: the event thread replaces it and restarts this child.
        set_up(0);
        end_incarnation(slot, std::string("could not ask the zygote to fork: ") + e.what(), EndCause::ZYGOTE_DIED,
                        generation);
        return;
    }
    set_up(zygote_epoch);
}

void Supervisor::event_loop() {
    for (;;) {
        ZygoteEvent e{};
        try {
            while (launcher_->read_event(e)) {
                on_event(e);
            }
        } catch (const std::exception& ex) {
            if (!stopping_) {
                log_->error("{}: reading the zygote's events failed: {}; the zygote is replaced", options_.path,
                            ex.what());
            }
        }
        if (stopping_) {
            return;
        }
        on_zygote_died();
        if (zygote_lost_) {
            return;
        }
    }
}

void Supervisor::on_event(const ZygoteEvent& e) {
    switch (e.type) {
    case ZygoteEventType::SPAWNED:
    case ZygoteEventType::SPAWN_FAILED:
        on_spawned(e);
        break;
    case ZygoteEventType::EXITED:
        on_exited(e.pid, e.status);
        break;
    case ZygoteEventType::STANDBY:
        if (e.status == STANDBY_LOST) {
            log_->warn("{}: the socket of standby zygote pid {} could not be received (out of file descriptors); "
                       "that standby exits and the zygote forks another when it next starts a child",
                       options_.path, e.pid);
        } else {
            log_->debug("{}: standby zygote pid {} ready", options_.path, e.pid);
        }
        break;
    case ZygoteEventType::STANDBY_EXITED:
        if (!stopping_) {
            const bool dropped = WIFEXITED(e.status) && WEXITSTATUS(e.status) == 0; // its socket was lost
            log_->warn("{}: standby zygote pid {} {}; the zygote forks another{}", options_.path, e.pid,
                       describe_wait_status(e.status), dropped ? " when it next starts a child" : "");
        }
        break;
    }
}

// The zygote's children died with it (PR_SET_PDEATHSIG). Its standby, forked from it and so just as
// single-threaded and CUDA-free, with the same arenas, becomes the zygote; every child restarts through it.
void Supervisor::on_zygote_died() {
    const ZygoteDeath dead = launcher_->replace();
    const std::string how = dead.how.empty() ? "died" : dead.how;
    const bool healthy = clock_->now() - zygote_since_ >= HEALTHY_UPTIME;
    zygote_failures_ = healthy ? 1 : zygote_failures_ + 1;
    zygote_since_ = clock_->now();
    if (dead.successor <= 0 || zygote_failures_ > options_.restart_budget) {
        give_up("the zygote (pid " + std::to_string(dead.pid) + ") " + how +
                (dead.successor <= 0
                     ? " and no standby could take its place"
                     : " and zygotes died " + std::to_string(zygote_failures_) +
                           " times in a row, past the restart budget of " + std::to_string(options_.restart_budget)));
        return;
    }
    log_->error("{}: the zygote (pid {}) {}; standby pid {} takes its place and every child restarts", options_.path,
                dead.pid, how, dead.successor);
    for (auto& slot : slots_) {
        // Only incarnations the dead zygote forked: a restart may already have gone through its successor.
        std::uint32_t generation = 0;
        pid_t pid = -1;
        {
            // An incarnation still being set up has no epoch yet: which zygote it went to is known once it has.
            std::unique_lock lock(slot->mu);
            slot->wait_set_up(lock);
            if (slot->live && slot->live->zygote_epoch < dead.epoch) {
                generation = slot->live->generation;
                pid = slot->live->pid;
            }
        }
        if (generation != 0) {
            {
                std::lock_guard lock(events_mu_);
                by_pid_.erase(pid); // its exit is nobody's to report now
            }
            end_incarnation(*slot, "died with the zygote (pid " + std::to_string(dead.pid) + ")", EndCause::ZYGOTE_DIED,
                            generation);
        }
    }
}

void Supervisor::give_up(const std::string& why) {
    zygote_lost_ = true;
    log_->critical("{}: {}; the tree cannot heal and every worker is dead", options_.path, why);
    for (auto& slot : slots_) {
        end_incarnation(*slot, "died with the zygote: " + why, EndCause::ZYGOTE_DIED);
    }
    if (on_fatal_) {
        on_fatal_(why);
    }
}

void Supervisor::on_spawned(const ZygoteEvent& e) {
    if (e.child_index >= slots_.size()) {
        return;
    }
    ChildSlot& slot = *slots_[e.child_index];
    if (e.type == ZygoteEventType::SPAWN_FAILED) {
        end_incarnation(slot, std::string("fork failed: ") + std::strerror(e.status), EndCause::EXITED, e.generation);
        return;
    }
    {
        std::lock_guard lock(slot.mu);
        if (!slot.live || slot.live->generation != e.generation) {
            return;
        }
        slot.live->pid = e.pid;
        slot.live->mailbox->set_child_pid(e.pid);
    }
    std::lock_guard lock(events_mu_);
    by_pid_[e.pid] = &slot;
}

void Supervisor::on_exited(pid_t pid, int status) {
    ChildSlot* slot = nullptr;
    {
        std::lock_guard lock(events_mu_);
        const auto it = by_pid_.find(pid);
        if (it == by_pid_.end()) {
            return;
        }
        slot = it->second;
        by_pid_.erase(it);
    }
    end_incarnation(*slot, describe_wait_status(status));
}

void Supervisor::end_incarnation(ChildSlot& slot, const std::string& why, EndCause cause, std::uint32_t generation) {
    std::unique_ptr<Incarnation> inc;
    std::shared_ptr<RemoteTasks> tasks; // a remote node's Tasks stream, closed outside the slot's lock
    Clock::duration uptime{};
    {
        std::unique_lock lock(slot.mu);
        slot.wait_set_up(lock);
        if (!slot.live || (generation != 0 && slot.live->generation != generation)) {
            return;
        }
        inc = std::move(slot.live);
        tasks = std::move(inc->tasks);
        // Until the restart policy decides below, the slot reads as restarting: never running without a child.
        uptime = slot.state == WorkerState::RUNNING ? clock_->now() - slot.running_since : Clock::duration{};
        if (slot.state == WorkerState::RUNNING || slot.state == WorkerState::STARTING) {
            slot.state = WorkerState::RESTARTING;
        }
        const bool reported = slot.fatal || slot.lost;
        slot.last_exit = reported ? slot.last_exit + "; " + why : why;
    }
    // Its replies now find the incarnation ended, and what it had in flight fails below with the mailbox's frames.
    tasks.reset();
    inc->ended = true;
    inc->mailbox->wake_waiters();
    if (inc->control) {
        ::shutdown(inc->control.get(), SHUT_RDWR);
    }
    if (inc->completion_thread.joinable()) {
        inc->completion_thread.join();
    }
    if (inc->control_thread.joinable()) {
        inc->control_thread.join();
    }
    std::vector<std::pair<TaskCallback, TaskResult>> results;
    bool dead = false;
    bool repeated = false;
    {
        std::lock_guard lock(slot.mu);
        try {
            while (auto c = inc->mailbox->poll()) {
                auto it = slot.in_flight.find(c->dispatch_id);
                if (it != slot.in_flight.end()) {
                    count_result(slot, it->second, c->code);
                    note_failure(it->second, c->code);
                    results.emplace_back(std::move(it->second.done),
                                         TaskResult{c->task_id, c->code, c->message, c->start_ns, c->end_ns});
                    slot.in_flight.erase(it);
                }
            }
        } catch (const ipc::MailboxPoisoned&) {
            // The remaining frames are failed below.
        }
        const std::size_t lost = slot.in_flight.size();
        const std::string died = "worker " + slot.path + " died (" + slot.last_exit + ")";
        for (auto& [dispatch, task] : slot.in_flight) {
            count_result(slot, task, ErrorCode::WORKER_DIED);
            const bool timed_out = task.task_id == slot.timed_out_task;
            note_failure(task, timed_out ? ErrorCode::TIMEOUT : ErrorCode::WORKER_DIED);
            results.emplace_back(std::move(task.done),
                                 timed_out
                                     ? TaskResult{task.task_id, ErrorCode::TIMEOUT,
                                                  "task " + std::to_string(task.task_id) + " ran past its timeout of " +
                                                      std::to_string(task.timeout.count()) + " ms; worker " +
                                                      slot.path + " was killed and restarts",
                                                  0, 0}
                                     : TaskResult{task.task_id, ErrorCode::WORKER_DIED,
                                                  died + " while running task " + std::to_string(task.task_id), 0, 0});
        }
        slot.in_flight.clear();
        if (slot.spec.kind == ChildKind::REMOTE) {
            // The session ended with the link, and the node released what the session made. What was queued for
            // the session and not yet sent fails with what was in flight: the next session, if one comes, is a
            // new incarnation of the host.
            if (const std::size_t gone = buffers_.lose_remote(slot.path, slot.last_exit); gone > 0) {
                log_->warn("{}: {} buffers on its host are stale: {}", slot.path, gone, slot.last_exit);
            }
            fail_all_locked(slot, ErrorCode::WORKER_DIED,
                            "remote node " + slot.path + " lost its session before the task was sent (" +
                                slot.last_exit + ")",
                            results);
        }
        fail_ordered_pending_locked(slot, results);
        slot.timed_out_task = 0;
        slot.deadline = Clock::time_point::max();
        // A link that keeps failing for the same reason (its host stays down) says so once at warning; the
        // attempts after that are logged at debug until something changes.
        repeated = slot.lost && lost == 0 && slot.lost_reason == slot.last_lost_reason;
        slot.last_lost_reason = slot.lost ? slot.lost_reason : std::string();
        const std::string line = after_death_locked(slot, cause, inc->pid, lost, uptime);
        dead = slot.state == WorkerState::DEAD;
        // Written under the slot's lock, like every line of a start that failed: the restart it announces spawns
        // under this lock, and the housekeeping thread takes every slot's lock before it waits for that restart,
        // so the journal never shows the worker up again before the line that says it died.
        if (!line.empty()) {
            log_->log(dead ? spdlog::level::err : repeated ? spdlog::level::debug : spdlog::level::warn, "{}", line);
        }
        if (dead) {
            fail_all_locked(slot, ErrorCode::WORKER_DIED,
                            "worker " + slot.path + " is dead after " + std::to_string(slot.restarts) +
                                " restarts (last exit: " + slot.last_exit + ")",
                            results);
        } else if (slot.state == WorkerState::STOPPED) {
            fail_all_locked(slot, ErrorCode::WORKER_DIED, "worker " + slot.path + " stopped", results);
        }
    }
    notify_events();
    deliver(results);
    changed();
}

std::string Supervisor::after_death_locked(ChildSlot& slot, EndCause cause, pid_t pid, std::size_t failed_tasks,
                                           std::chrono::steady_clock::duration uptime) {
    // A child that never got a pid (its start failed, or its zygote died first) is named by its path alone.
    const std::string who = slot.path + (pid > 0 ? " (pid " + std::to_string(pid) + ") " : std::string(" "));
    if (stopping_ || cause == EndCause::STOPPED) {
        slot.state = WorkerState::STOPPED;
        return {};
    }
    const RestartDecision d = zygote_lost_ ? RestartDecision{}
                              : slot.lost
                                  ? policy_.on_lost(slot.failures, uptime)
                                  : policy_.on_death(slot.failures, uptime, slot.fatal, cause != EndCause::ZYGOTE_DIED);
    slot.lost = false;
    slot.failures = d.failures;
    if (!d.restart) {
        slot.state = WorkerState::DEAD;
        return "worker " + who + slot.last_exit + tasks_phrase(failed_tasks) + "; marked dead after " +
               std::to_string(slot.restarts) + " restarts" +
               (zygote_lost_ ? std::string() : "; `canopy worker restart " + slot.path + "` revives it");
    }
    slot.state = WorkerState::RESTARTING;
    ++slot.restarts;
    schedule_restart(slot, d.delay);
    return "worker " + who + slot.last_exit + tasks_phrase(failed_tasks) + "; restart " +
           std::to_string(slot.restarts) + " in " + std::to_string(d.delay.count()) + " ms";
}

// REQUIRES slot.mu. restart_mu_ is a leaf lock; the caller calls notify_events() to wake the housekeeping thread.
void Supervisor::schedule_restart(ChildSlot& slot, std::chrono::milliseconds delay) {
    std::lock_guard restart_lock(restart_mu_);
    restarts_due_.emplace(clock_->now() + delay, &slot);
}

// The restart due first, if any is due by now; it is taken off the list.
ChildSlot* Supervisor::take_due_restart() {
    std::lock_guard restart_lock(restart_mu_);
    if (restarts_due_.empty() || restarts_due_.begin()->first > clock_->now()) {
        return nullptr;
    }
    ChildSlot* slot = restarts_due_.begin()->second;
    restarts_due_.erase(restarts_due_.begin());
    return slot;
}

void Supervisor::housekeeping_loop() {
    while (!stopping_) {
        const std::uint32_t seen = events_.value();
        auto wake = Clock::time_point::max();
        {
            std::lock_guard restart_lock(restart_mu_);
            if (!restarts_due_.empty()) {
                wake = restarts_due_.begin()->first;
            }
        }
        for (const auto& slot : slots_) {
            std::lock_guard slot_lock(slot->mu);
            wake = std::min(wake, slot->deadline);
        }
        if (stopping_) {
            return;
        }
        if (clock_->now() < wake) {
            clock_->wait_until(events_, seen, wake); // a deadline armed or a restart scheduled since `seen` ends it
            continue;
        }
        expire_deadlines();
        while (ChildSlot* slot = stopping_ ? nullptr : take_due_restart()) {
            spawn(*slot);
        }
    }
}

// Kills the worker of every slot whose running task outlived its timeout; the exit event then fails
// that task with TIMEOUT and restarts the worker.
void Supervisor::expire_deadlines() {
    const auto now = clock_->now();
    for (const auto& slot : slots_) {
        std::lock_guard lock(slot->mu);
        if (slot->deadline > now || !slot->live || slot->live->pid <= 0) {
            continue;
        }
        const auto it = slot->in_flight.find(slot->oldest_dispatch);
        slot->deadline = Clock::time_point::max();
        if (it == slot->in_flight.end()) {
            continue;
        }
        slot->timed_out_task = it->second.task_id;
        log_->warn("worker {} (pid {}): task {} ran past its timeout of {} ms; killing the worker", slot->path,
                   slot->live->pid, it->second.task_id, it->second.timeout.count());
        launcher_->kill(slot->live->pid, SIGKILL);
    }
}

void Supervisor::restart_worker(const std::string& path) {
    const Route route = resolve_any(path);
    ChildSlot& slot = *route.slot;
    if (!route.target.empty() && slot.spec.kind == ChildKind::REMOTE) {
        throw RequestError(ErrorCode::BAD_REQUEST, "worker " + path + " runs on the host of remote node " + slot.path +
                                                       " and is restarted there (canopy worker restart " +
                                                       route.target + " on that host)");
    }
    if (!route.target.empty()) {
        std::lock_guard lock(slot.mu);
        if (slot.state != WorkerState::RUNNING || !slot.live) {
            throw RequestError(ErrorCode::WORKER_DIED,
                               "node " + slot.path + " is " + to_string(slot.state) + "; restart the node itself");
        }
        send_worker_restart(*slot.live, route.target);
        return;
    }
    bool revive = false;
    {
        std::lock_guard lock(slot.mu);
        if (slot.state == WorkerState::DEAD && !zygote_lost_) {
            slot.failures = 0;
            slot.fatal = false;
            slot.state = WorkerState::RESTARTING;
            revive = true;
        } else if (slot.live && slot.live->pid > 0) {
            log_->warn("worker {} (pid {}): killed to restart it, as asked", slot.path, slot.live->pid);
            launcher_->kill(slot.live->pid, SIGKILL);
            return;
        } else if (zygote_lost_) {
            throw RequestError(ErrorCode::WORKER_DIED, slot.path + " cannot restart: " + slot.last_exit);
        } else {
            return; // starting or restarting already
        }
    }
    if (revive) {
        log_->warn("worker {}: revived, as asked (last exit: {})", slot.path, slot.last_exit);
        {
            std::lock_guard lock(slot.mu);
            schedule_restart(slot, std::chrono::milliseconds(0));
        }
        notify_events();
        changed();
    }
}

void Supervisor::stop(std::optional<std::chrono::steady_clock::time_point> drain_until) {
    if (stopped_) {
        return;
    }
    stopped_ = true;
    // Drain: let accepted work finish, up to the deadline.
    draining_ = true;
    const auto deadline = drain_until.value_or(Steady::now() + options_.drain_timeout);
    const auto drained = [&] {
        return std::all_of(slots_.begin(), slots_.end(), [](const auto& s) {
            std::lock_guard slot_lock(s->mu);
            return !s->live || (s->pending.empty() && s->in_flight.empty());
        });
    };
    for (;;) {
        const std::uint32_t seen = events_.value();
        if (drained() || Steady::now() >= deadline) {
            break;
        }
        events_.wait_until(seen, deadline);
    }
    // Relays still waiting for their staging buffer run now; their stages are refused once stopping_ is set.
    relays_.stop();
    stopping_ = true;
    notify_events();
    for (auto& slot : slots_) {
        std::lock_guard lock(slot->mu);
        if (slot->live) {
            slot->live->mailbox->request_shutdown();
        }
    }
    // Children still busy past the drain, or that ignore the request, are killed by the zygote's stop.
    const auto grace_end = Steady::now() + STOP_GRACE;
    for (;;) {
        const std::uint32_t seen = events_.value();
        {
            std::lock_guard lock(events_mu_);
            if (by_pid_.empty() || zygote_lost_ || Steady::now() >= grace_end) {
                break;
            }
        }
        events_.wait_until(seen, grace_end);
    }
    launcher_->stop();
    if (event_thread_.joinable()) {
        event_thread_.join();
    }
    if (housekeeping_thread_.joinable()) {
        housekeeping_thread_.join();
    }
    for (auto& slot : slots_) {
        end_incarnation(*slot, "stopped", EndCause::STOPPED);
    }
    buffers_.release_all();
}

} // namespace canopy::daemon
