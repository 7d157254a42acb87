#include "daemon/supervisor.h"

#include "ipc/child_message.h"
#include "ipc/fd_passing.h"
#include "ipc/sys_error.h"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <future>
#include <signal.h>
#include <sys/socket.h>

namespace canopy::daemon {
namespace {

using Clock = std::chrono::steady_clock;

// A child that stayed up this long counts as healthy again: its next death starts the back-off over.
constexpr auto HEALTHY_UPTIME = std::chrono::seconds(30);

void deliver(std::vector<std::pair<TaskCallback, TaskResult>>& results) {
    for (auto& [done, result] : results) {
        if (done) {
            done(std::move(result));
        }
    }
    results.clear();
}

} // namespace

Supervisor::Supervisor(SupervisorOptions options)
    : options_(std::move(options)), arenas_(map_preloads()),
      zygote_(
          Zygote::start([opts = options_](const SpawnRequest& request, ipc::UniqueFd mailbox, ipc::UniqueFd control) {
              return run_child(opts, request, std::move(mailbox), std::move(control));
          })),
      buffers_(options_.state_dir / "journal") {
    buffers_.journal().recover();
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
    // Taking events_mu_ between the state change and the notify: a waiter is either before its predicate
    // check (and sees the change) or already waiting (and is woken).
    { std::lock_guard lock(events_mu_); }
    events_cv_.notify_all();
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
    const auto deadline = Clock::now() + options_.ready_timeout;
    std::unique_lock lock(events_mu_);
    auto settled = [&] {
        return std::all_of(slots_.begin(), slots_.end(), [](const auto& s) {
            std::lock_guard slot_lock(s->mu);
            return s->state == WorkerState::RUNNING || s->state == WorkerState::DEAD;
        });
    };
    // Slices bound the cost of a wake-up lost to a notifier that holds a slot's mutex instead of events_mu_.
    while (!settled() && Clock::now() < deadline) {
        events_cv_.wait_until(lock, std::min(deadline, Clock::now() + EVENT_SLICE));
    }
    std::string failed;
    for (const auto& s : slots_) {
        std::lock_guard slot_lock(s->mu);
        if (s->state != WorkerState::RUNNING) {
            failed += (failed.empty() ? "" : "; ") + s->path + " is " + to_string(s->state) +
                      (s->last_exit.empty() ? "" : " (" + s->last_exit + ")");
        }
    }
    if (!failed.empty()) {
        lock.unlock();
        throw std::runtime_error("children did not come up: " + failed);
    }
}

void Supervisor::spawn(ChildSlot& slot) {
    auto inc = std::make_unique<Incarnation>();
    Incarnation* raw = inc.get();
    {
        std::lock_guard lock(slot.mu);
        if (stopping_) {
            return;
        }
        inc->generation = ++slot.generation;
        slot.state = WorkerState::STARTING;
        inc->mailbox = std::make_unique<ipc::MailboxParent>(inc->generation);
        inc->spawned_at = Clock::now();
        slot.live = std::move(inc);
    }
    auto [ours, theirs] = ipc::seqpacket_pair();
    raw->control = std::move(ours);
    raw->completion_thread = std::thread([this, &slot, raw] { completion_loop(slot, *raw); });
    raw->control_thread = std::thread([this, &slot, raw] { control_loop(slot, *raw); });
    try {
        zygote_.request_spawn({slot.index, raw->generation}, raw->mailbox->fd(), theirs.get());
    } catch (const std::exception& e) {
        end_incarnation(slot, std::string("could not ask the zygote to fork: ") + e.what());
    }
}

void Supervisor::event_loop() {
    ZygoteEvent e{};
    try {
        while (zygote_.read_event(e)) {
            switch (e.type) {
            case ZygoteEventType::SPAWNED:
            case ZygoteEventType::SPAWN_FAILED:
                on_spawned(e);
                break;
            case ZygoteEventType::EXITED:
                on_exited(e.pid, e.status);
                break;
            }
        }
    } catch (const std::exception&) {
    }
    if (stopping_) {
        return;
    }
    // The zygote died: its children died with it (PR_SET_PDEATHSIG) and none can be forked again, since
    // a new zygote cannot be forked from this multi-threaded process.
    zygote_lost_ = true;
    for (auto& slot : slots_) {
        end_incarnation(*slot, "the zygote died");
    }
}

void Supervisor::on_spawned(const ZygoteEvent& e) {
    if (e.child_index >= slots_.size()) {
        return;
    }
    ChildSlot& slot = *slots_[e.child_index];
    if (e.type == ZygoteEventType::SPAWN_FAILED) {
        end_incarnation(slot, std::string("fork failed: ") + std::strerror(e.status));
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

void Supervisor::end_incarnation(ChildSlot& slot, const std::string& why) {
    std::unique_ptr<Incarnation> inc;
    {
        std::lock_guard lock(slot.mu);
        if (!slot.live) {
            return;
        }
        inc = std::move(slot.live);
        const bool fatal_reported = slot.last_exit.rfind("fatal: ", 0) == 0;
        slot.last_exit = fatal_reported ? slot.last_exit + "; " + why : why;
    }
    inc->ended = true;
    inc->mailbox->wake_waiters();
    ::shutdown(inc->control.get(), SHUT_RDWR);
    if (inc->completion_thread.joinable()) {
        inc->completion_thread.join();
    }
    if (inc->control_thread.joinable()) {
        inc->control_thread.join();
    }
    std::vector<std::pair<TaskCallback, TaskResult>> results;
    {
        std::lock_guard lock(slot.mu);
        try {
            while (auto c = inc->mailbox->poll()) {
                auto it = slot.in_flight.find(c->dispatch_id);
                if (it != slot.in_flight.end()) {
                    count_result(slot, it->second, c->code);
                    results.emplace_back(std::move(it->second.done),
                                         TaskResult{c->task_id, c->code, c->message, c->start_ns, c->end_ns});
                    slot.in_flight.erase(it);
                }
            }
        } catch (const ipc::MailboxPoisoned&) {
            // The remaining frames are failed below.
        }
        const std::string died = "worker " + slot.path + " died (" + slot.last_exit + ")";
        for (auto& [dispatch, task] : slot.in_flight) {
            count_result(slot, task, ErrorCode::WORKER_DIED);
            const bool timed_out = task.task_id == slot.timed_out_task;
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
        slot.timed_out_task = 0;
        slot.deadline = Clock::time_point::max();
        const bool fatal = slot.last_exit.rfind("fatal: ", 0) == 0;
        if (stopping_) {
            slot.state = WorkerState::STOPPED;
            fail_all_locked(slot, ErrorCode::WORKER_DIED, "worker " + slot.path + " stopped", results);
        } else {
            const bool healthy =
                slot.state == WorkerState::RUNNING && Clock::now() - slot.running_since > HEALTHY_UPTIME;
            slot.failures = healthy ? 1 : slot.failures + 1;
            if (fatal || zygote_lost_ || slot.failures > options_.restart_budget) {
                slot.state = WorkerState::DEAD;
                fail_all_locked(slot, ErrorCode::WORKER_DIED,
                                "worker " + slot.path + " is dead after " + std::to_string(slot.restarts) +
                                    " restarts (last exit: " + slot.last_exit + ")",
                                results);
            } else {
                slot.state = WorkerState::RESTARTING;
                ++slot.restarts;
                const auto doubled = options_.backoff_initial * (1LL << std::min<std::uint32_t>(slot.failures - 1, 20));
                const auto backoff = std::min<std::chrono::milliseconds>(
                    std::chrono::duration_cast<std::chrono::milliseconds>(doubled), options_.backoff_max);
                std::lock_guard events_lock(events_mu_);
                restarts_due_.emplace(Clock::now() + backoff, &slot);
            }
        }
    }
    notify_events();
    deliver(results);
}

void Supervisor::housekeeping_loop() {
    std::unique_lock lock(events_mu_);
    while (!stopping_) {
        auto wake = restarts_due_.empty() ? Clock::time_point::max() : restarts_due_.begin()->first;
        for (const auto& slot : slots_) {
            std::lock_guard slot_lock(slot->mu);
            wake = std::min(wake, slot->deadline);
        }
        if (Clock::now() < wake) {
            // A deadline armed under a slot's mutex notifies without events_mu_; the slice bounds how late a
            // wake-up lost that way can make the timeout.
            events_cv_.wait_until(lock, std::min(wake, Clock::now() + HOUSEKEEPING_SLICE));
            continue;
        }
        lock.unlock();
        expire_deadlines();
        lock.lock();
        while (!restarts_due_.empty() && restarts_due_.begin()->first <= Clock::now() && !stopping_) {
            ChildSlot* slot = restarts_due_.begin()->second;
            restarts_due_.erase(restarts_due_.begin());
            lock.unlock();
            spawn(*slot);
            lock.lock();
        }
    }
}

// Kills the worker of every slot whose running task outlived its timeout; the exit event then fails
// that task with TIMEOUT and restarts the worker.
void Supervisor::expire_deadlines() {
    const auto now = Clock::now();
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
        if (slot->live->pid > 0) { // never kill(0) or kill(-1): those reach whole process groups
            ::kill(slot->live->pid, SIGKILL);
        }
    }
}

void Supervisor::control_loop(ChildSlot& slot, Incarnation& inc) {
    std::vector<std::byte> buffer(ipc::MAX_CHILD_MESSAGE_BYTES);
    for (;;) {
        ipc::ChildMessage m{};
        std::vector<ipc::UniqueFd> fds;
        std::size_t n = 0;
        try {
            n = ipc::recv_message(inc.control.get(), buffer, fds);
        } catch (const std::exception&) {
            return;
        }
        if (n < sizeof m) {
            return; // EOF, or a child that speaks something else: its exit is handled by the zygote event
        }
        std::memcpy(&m, buffer.data(), sizeof m);
        if (static_cast<ipc::ChildMessageType>(m.type) == ipc::ChildMessageType::STATUS_REPLY) {
            std::lock_guard lock(slot.mu);
            inc.status_reply.assign(reinterpret_cast<const char*>(buffer.data()) + sizeof m, n - sizeof m);
            ++inc.status_replies;
            status_cv_.notify_all();
            continue;
        }
        if (n != sizeof m) {
            return;
        }
        switch (static_cast<ipc::ChildMessageType>(m.type)) {
        case ipc::ChildMessageType::READY: {
            std::lock_guard lock(slot.mu);
            if (inc.pid <= 0 && m.pid > 0) {
                inc.pid = m.pid; // READY can overtake the zygote's SPAWNED event
            }
            if (slot.live.get() == &inc && slot.state == WorkerState::STARTING) {
                slot.state = WorkerState::RUNNING;
                slot.running_since = Clock::now();
                queue_module_replays_locked(slot);
                fill_locked(slot);
            }
            break;
        }
        case ipc::ChildMessageType::FATAL: {
            std::lock_guard lock(slot.mu);
            slot.last_exit = "fatal: " + std::string(m.text, std::min<std::size_t>(m.text_len, sizeof m.text));
            break;
        }
        case ipc::ChildMessageType::FD_REQUEST:
            serve_fd_request(slot, inc, m);
            break;
        case ipc::ChildMessageType::FD_OFFER:
            // Accepted only for a creation this supervisor waits for, from the chip it asked; else the fd closes.
            // A nested supervisor passes its parent's buffers up.
            if (fds.size() == 1) {
                if (m.descriptor.identity.owner_instance != buffers_.owner_instance() && parent_ != nullptr) {
                    try {
                        parent_->relay_offer(m.descriptor, m.rank, fds[0].get());
                    } catch (const std::exception&) {
                        // The parent is gone; its creation fails by its own timeout.
                    }
                } else {
                    (void)buffers_.offer_fd(m.descriptor, slot.path, m.rank, std::move(fds[0]));
                }
            }
            break;
        default:
            break;
        }
        notify_events();
    }
}

void Supervisor::serve_fd_request(const ChildSlot& slot, Incarnation& inc, const ipc::ChildMessage& request) {
    const BufferDescriptor& d = request.descriptor;
    ipc::ChildMessage reply{};
    reply.type = static_cast<std::uint32_t>(ipc::ChildMessageType::FD_REPLY);
    reply.rank = ipc::NOT_SYMMETRIC;
    auto refuse = [&](ErrorCode code, const std::string& text) {
        reply.code = static_cast<std::uint16_t>(code);
        reply.text_len = static_cast<std::uint16_t>(std::min(text.size(), sizeof reply.text));
        std::memcpy(reply.text, text.data(), reply.text_len);
        ipc::send_struct(inc.control.get(), reply);
    };
    // The worker that asks: the child itself, or (from a nested supervisor) a worker below it.
    std::string requester = slot.path;
    if (slot.spec.kind == ChildKind::NODE) {
        const std::string named(request.text, std::min<std::size_t>(request.text_len, sizeof request.text));
        if (named.rfind(slot.path + "/", 0) == 0) {
            requester = named;
        }
    }
    try {
        validate_descriptor(d);
        std::vector<ipc::UniqueFd> fds;
        if (d.identity.owner_instance != buffers_.owner_instance() && parent_ != nullptr) {
            worker::VmmFds got = reexported_fds(d, requester);
            fds = std::move(got.fds);
            reply.rank = got.symmetric ? static_cast<std::uint16_t>(got.rank) : ipc::NOT_SYMMETRIC;
        } else {
            const auto info = buffers_.find(d.identity);
            if (!info || !(info->descriptor == d)) {
                const bool stale = buffers_.lookup(d.identity) == BufferLookup::STALE;
                refuse(stale ? ErrorCode::STALE_BUFFER : ErrorCode::UNKNOWN_BUFFER,
                       "buffer " + to_string(d.identity) + " is not live here");
                return;
            }
            if (!info->world.empty()) {
                const auto it = std::find(info->world.begin(), info->world.end(), requester);
                if (it == info->world.end()) {
                    refuse(ErrorCode::UNREACHABLE_BUFFER,
                           requester + " is not in the world of " + to_string(d.identity));
                    return;
                }
                reply.rank = static_cast<std::uint16_t>(it - info->world.begin());
            }
            fds = buffers_.dup_fds(d.identity);
        }
        if (fds.empty() || fds.size() > ipc::MAX_FDS_PER_MESSAGE) {
            refuse(ErrorCode::UNREACHABLE_BUFFER, "buffer " + to_string(d.identity) + " has no file descriptor");
            return;
        }
        std::vector<int> raw;
        for (const auto& fd : fds) {
            raw.push_back(fd.get());
        }
        reply.world = static_cast<std::uint16_t>(raw.size());
        ipc::send_struct(inc.control.get(), reply, raw);
    } catch (const WireError& e) {
        refuse(e.code(), e.what());
    } catch (const worker::ImportError& e) {
        refuse(e.code(), e.what());
    } catch (const std::exception& e) {
        refuse(ErrorCode::UNREACHABLE_BUFFER, e.what());
    }
}

worker::VmmFds Supervisor::reexported_fds(const BufferDescriptor& d, const std::string& requester) {
    const std::string key = to_string(d.identity) + " " + requester;
    std::lock_guard lock(reexport_mu_);
    auto it = reexports_.find(key);
    if (it == reexports_.end()) {
        // Asked of the parent once per worker; a released buffer's entries go in broadcast_release.
        it = reexports_.emplace(key, std::pair(d.identity, parent_->fetch_fds(d, requester))).first;
    }
    const worker::VmmFds& kept = it->second.second;
    worker::VmmFds out;
    for (const auto& fd : kept.fds) {
        out.fds.emplace_back(ipc::sys_check(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0), "fcntl(F_DUPFD_CLOEXEC)"));
    }
    out.symmetric = kept.symmetric;
    out.rank = kept.rank;
    return out;
}

void Supervisor::stop() {
    if (stopped_) {
        return;
    }
    stopped_ = true;
    // Drain: let accepted work finish, up to the drain timeout.
    draining_ = true;
    const auto deadline = Clock::now() + options_.drain_timeout;
    {
        std::unique_lock lock(events_mu_);
        const auto drained = [&] {
            return std::all_of(slots_.begin(), slots_.end(), [](const auto& s) {
                std::lock_guard slot_lock(s->mu);
                return !s->live || (s->pending.empty() && s->in_flight.empty());
            });
        };
        while (!drained() && Clock::now() < deadline) {
            events_cv_.wait_until(lock, std::min(deadline, Clock::now() + EVENT_SLICE));
        }
    }
    stopping_ = true;
    notify_events();
    for (auto& slot : slots_) {
        std::lock_guard lock(slot->mu);
        if (slot->live) {
            slot->live->mailbox->request_shutdown();
        }
    }
    {
        std::unique_lock lock(events_mu_);
        // Without a zygote no exit is reported any more; its children died with it.
        events_cv_.wait_for(lock, std::chrono::seconds(5), [&] { return by_pid_.empty() || zygote_lost_; });
    }
    zygote_.stop();
    if (event_thread_.joinable()) {
        event_thread_.join();
    }
    if (housekeeping_thread_.joinable()) {
        housekeeping_thread_.join();
    }
    for (auto& slot : slots_) {
        end_incarnation(*slot, "stopped");
    }
    buffers_.release_all();
}

} // namespace canopy::daemon
