#pragma once
// Supervisor: one class for L3 and L4 (the level is a label). It starts its launcher (the zygote, forked before
// any thread exists) and has it fork one process per configured child (chip, sub, or a nested supervisor), dispatches
// tasks to them through their mailboxes, restarts children that die (exponential back-off, restart
// budget, then DEAD: tasks aimed at a dead worker fail fast), replaces a dead zygote with its standby and
// restarts every child through it (or calls on_fatal when it cannot), logs every such event once, owns the
// buffers it creates, and stops gracefully. Its parts live in their own files: lifecycle (supervisor.cpp),
// dispatch (supervisor_dispatch.cpp), the children's control sockets (supervisor_control.cpp), buffers
// (supervisor_buffers.cpp over BufferRegistry), user modules (ModuleService, supervisor_modules.cpp) and status
// (supervisor_status.cpp).
//
// Lock order: events_mu_ (the pid map), then a slot's mu, then restart_mu_ or the module table's (leaf locks).
//
// Lifecycle: construct (forks the zygote unless the seams give another launcher: REQUIRES a single-threaded
// process then), start() (spawns every
// child and waits until each is up), then submit/run/create_buffer/... from any thread, then stop()
// (also run by the destructor).
//
// Thread safety: every public method may be called from any thread after start().

#include "daemon/arenas.h"
#include "daemon/buffer_registry.h"
#include "daemon/child_launcher.h"
#include "daemon/child_slot.h"
#include "daemon/clock.h"
#include "daemon/module_service.h"
#include "daemon/request_error.h"
#include "daemon/restart_policy.h"
#include "daemon/serial_worker.h"
#include "daemon/supervisor_options.h"
#include "daemon/task.h"
#include "ipc/child_message.h"
#include "protocol/module_image.h"
#include "worker/import_registry.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <spdlog/logger.h>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace canopy::daemon {

struct RemoteReply;

struct BufferRequest {
    std::uint64_t nbytes = 0;
    Backend backend = Backend::POSIX_SHM;
    Access access = Access::READWRITE;
    std::string on;                 // chip path for device buffers; empty for host buffers
    std::vector<std::string> world; // symmetric device buffers: the chips of ranks 0..n-1
};

// How long a chip may take to create its copy of a device buffer and hand over the fd.
inline constexpr std::chrono::milliseconds CREATE_TIMEOUT{30000};

// Most ranks a symmetric buffer may have (one fd per rank travels in one control message).
inline constexpr std::size_t MAX_WORLD = 8;

// The parent of a nested supervisor, as its Supervisor sees it (implemented by the next-level worker).
class ParentLink {
public:
    virtual ~ParentLink() = default;
    // The fds of `d` for the worker at `requester` (a full path), from the supervisor that owns `d`. Throws
    // worker::ImportError with the owner's code when it refuses.
    virtual worker::VmmFds fetch_fds(const BufferDescriptor& d, const std::string& requester) = 0;
    // Hands the fd of a device allocation a chip below made for a parent's buffer on to the parent.
    virtual void relay_offer(const BufferDescriptor& d, std::uint16_t rank, int fd) = 0;
};

// What a supervisor starts its children with and keeps time by. Left empty: a Zygote (forked in the constructor)
// and SteadyClock. `launcher` is called once, in the constructor, with what each child runs.
struct SupervisorSeams {
    std::function<std::unique_ptr<ChildLauncher>(ChildMain child_main)> launcher;
    std::shared_ptr<const Clock> clock;
};

class Supervisor {
public:
    explicit Supervisor(SupervisorOptions options, SupervisorSeams seams = {});
    ~Supervisor();
    Supervisor(const Supervisor&) = delete;
    Supervisor& operator=(const Supervisor&) = delete;

    // Called, with no lock held, after any worker of the tree changed state (started, died, restarted, marked
    // dead), this supervisor's or a nested one's; from the supervisor's threads. Set once, before start().
    void set_on_change(std::function<void()> on_change) { on_change_ = std::move(on_change); }
    // Called once, from the event thread, when the tree can no longer heal: the zygote died and no standby
    // could take over, or zygotes died more than the restart budget allows. Every worker is then dead and the
    // owner should exit non-zero, so that whoever started it starts it afresh. Set once, before start().
    void set_on_fatal(std::function<void(const std::string& why)> on_fatal) { on_fatal_ = std::move(on_fatal); }

    // Spawns every child; returns once all are RUNNING. Throws std::runtime_error naming the children
    // that did not come up within the ready timeout.
    void start();
    // Lets accepted work finish until `drain_until` (default: now + the drain timeout), asks every child to
    // exit, kills those still there after STOP_GRACE, and releases every buffer. Idempotent.
    void stop(std::optional<std::chrono::steady_clock::time_point> drain_until = std::nullopt);
    // How long stop() waits for children to exit after asking them, before it kills them.
    static constexpr std::chrono::milliseconds STOP_GRACE{1000};

    // Restarts the worker at `path` (below this supervisor, nested ones too): a dead worker comes back with a
    // fresh restart budget; a live one is killed (its tasks fail WORKER_DIED) and comes back. Throws
    // RequestError(UNKNOWN_WORKER) for a path that names no worker of the tree.
    void restart_worker(const std::string& path);

    // Submits a task; `done` runs exactly once. Returns the task id.
    std::uint64_t submit(TaskRequest request, TaskCallback done);
    // Submits each task as submit() does, taking each worker's lock once for all the tasks bound to it rather
    // than once a task: the completion thread of that worker takes the same lock for every result. Tasks for one
    // worker keep their order.
    void submit_all(std::vector<std::pair<TaskRequest, TaskCallback>> tasks);
    // Submits and waits for the result.
    TaskResult run(TaskRequest request);
    // Takes back the tasks of `group` (TaskRequest::group, not 0) that are still queued here, not yet in a
    // mailbox: each fails CANCELLED with `why`. A task already in a worker's mailbox runs to its end. Returns how
    // many were taken back.
    std::size_t withdraw(std::uint64_t group, const std::string& why);
    // The submit-time checks alone (worker, kernel signature, every tensor, buffers, access,
    // reachability, PE range); throws RequestError.
    void check(const TaskRequest& request) const;
    // Whether `request` is a copy whose input and output are on different hosts (docs/multihost.md): such a copy
    // runs on the link of the remote node involved and is never ordered on a lane.
    bool crosses_hosts(const TaskRequest& request) const;
    // The children of this supervisor, for reports.
    bool has_chip(ChildKind kind) const;

    // The lane of `worker` (scheduler::Lane): a number for each cuda chip of this supervisor, which launches the
    // frames of its mailbox on its stream in order and fails a frame ordered after one that failed; NO_LANE (0)
    // for every other worker and path. Every worker honours TaskRequest::after, but only on a GPU does ordering
    // on the worker gain what it costs: sim chips and subs run one task at a time on the CPU, and a task still
    // queued in the service can be cancelled.
    std::uint32_t lane(const std::string& worker) const noexcept;
    // Forgets the failure of `task_id` that was kept for the tasks ordered after it (TaskRequest::keep_failure).
    // Call it once no task naming it in `after` can be submitted any more.
    void forget_failure(std::uint64_t task_id);

    // Throws RequestError (NO_CONSUMER, UNKNOWN_WORKER, BAD_REQUEST).
    BufferDescriptor create_buffer(const BufferRequest& request);
    // Marks a live buffer as released to every new use (BufferRegistry::begin_release): tasks and transfers that name
    // it from now on are refused STALE_BUFFER, while those already queued over it still run; release_buffer ends it.
    // Throws RequestError (UNKNOWN_BUFFER, STALE_BUFFER; BAD_REQUEST for a preloaded arena).
    void begin_release(const CanonicalIdentity& id);
    // Releases a live buffer, whether its release has begun or not. Throws RequestError (UNKNOWN_BUFFER, STALE_BUFFER;
    // BAD_REQUEST for a preloaded arena). Returns the release problem, if any.
    std::optional<std::string> release_buffer(const CanonicalIdentity& id);
    std::vector<BufferInfo> buffers() const { return buffers_.list(); }
    BufferRegistry& registry() noexcept { return buffers_; }

    // Every worker of the tree, nested ones included, from the state this supervisor keeps: it never waits on
    // a child. A nested supervisor reports its tree whenever it changes; while a node is not running, its
    // workers are listed from the topology with the node's state.
    std::vector<WorkerStatus> status() const;
    const SupervisorOptions& options() const noexcept { return options_; }
    pid_t zygote_pid() const { return launcher_->pid(); }
    pid_t standby_zygote_pid() const { return launcher_->standby_pid(); }
    // The nonce in the identity of every buffer this supervisor creates, new at every start.
    const std::array<std::uint8_t, 16>& owner_instance() const noexcept { return buffers_.owner_instance(); }

    // Tells every live child to drop its mapping of `id` (a nested supervisor forwards it) and forgets the
    // fds re-exported for it.
    void broadcast_release(const CanonicalIdentity& id);

    // Sends the control frame `kernel` (e.g. @vmm_create, forwarded by a nested supervisor) to the worker at
    // `worker`, a path below this supervisor; `done` runs exactly once. Throws RequestError(UNKNOWN_WORKER).
    void submit_control(const std::string& worker, std::string kernel, std::vector<std::byte> blob, TaskCallback done);

    // A nested supervisor's way up: fds of buffers it does not own come from its parent, and the fds its chips
    // make for its parent's buffers go to the parent. Set once, before start(); the link must outlive the
    // supervisor's children.
    void set_parent(ParentLink* link) noexcept { parent_ = link; }

    // User modules (docs/modules.md), kept by a ModuleService whose frames reach the cuda chips and nested
    // supervisors of this one; module_host() says how. Every recorded module is loaded again into a child that
    // restarts, before any task queued for it.
    void load_module_async(const std::string& name, std::vector<std::byte> image, ModuleCallback done) {
        modules_.load_async(name, std::move(image), std::move(done));
    }
    // The same, waiting; throws RequestError for any failure.
    ModuleInfo load_module(const std::string& name, std::vector<std::byte> image);
    bool unload_module(const std::string& name) { return modules_.unload(name); }
    std::vector<ModuleInfo> modules() const { return modules_.list(); }
    // The module whose image buffer `id` is, if any (such a buffer is released with its module, not by a user).
    std::optional<std::string> module_of_buffer(const CanonicalIdentity& id) const {
        return modules_.module_of_buffer(id);
    }

private:
    struct Route {
        ChildSlot* slot;
        std::string target; // below the child
        ChildKind worker_kind;
        std::uint32_t device; // chips: the worker's device
        std::string path() const { return target.empty() ? slot->path : slot->path + "/" + target; }
    };

    Route resolve_remote(ChildSlot& slot, const std::string& worker, std::string_view tail) const;
    // Why remote node `slot` takes nothing now (its link has no session): its state, its last exit and that it
    // reconnects. REQUIRES slot.mu.
    static std::string remote_down_locked(const ChildSlot& slot);

    // remote nodes' tasks (supervisor_remote.cpp)
    // The L4's own Tasks stream on the session the link of `inc` attached, which its READY names in `session`.
    // Throws std::runtime_error saying why none can be opened.
    std::shared_ptr<RemoteTasks> open_remote_tasks(ChildSlot& slot, Incarnation& inc, std::string_view session);
    // Completes the tasks `replies` answer, if `inc` still lives.
    void on_remote_replies(ChildSlot& slot, Incarnation& inc, std::vector<RemoteReply>& replies);
    // The host of remote node `slot` is lost for the session of `inc` (`why`: "its task stream ended (...)"), as
    // when its link reports LOST: the link is killed once its pid is known, and its exit fails what is in flight
    // naming the host, and starts it again with back-off. A slot already lost keeps its reason. REQUIRES slot.mu,
    // with slot.live == &inc.
    void lose_host_locked(ChildSlot& slot, Incarnation& inc, const std::string& why);

    // copies across hosts (supervisor_hosts.cpp)
    // The path of the remote node whose host holds `d`, or "" for this host.
    std::string host_of(const BufferDescriptor& d) const;
    ChildSlot* remote_slot(const std::string& host) const;
    // resolve(), except that a copy across hosts may name a remote node itself.
    Route route_of(const TaskRequest& request) const;
    void check_copy_side(const BufferDescriptor& d, std::size_t i, bool accepted) const;
    void check_copy_across(const Route& route, const TaskRequest& request) const;
    // The link slot that runs a checked copy across hosts, with `task` made for it; null when it runs in two
    // stages (relay), which then owns `done`.
    ChildSlot* route_across(TaskRequest& request, TaskCallback& done, PendingTask& task);
    // Runs a copy across hosts in two stages through a staging buffer of this host: `first` copies the input into
    // it, then `second` copies it to the output. The staging buffer is made on the relay thread (reserving its
    // pages takes about a second per GiB, which the submitting thread does not wait for); `done` is taken.
    void relay(const TaskRequest& request, TaskCallback& done, std::uint64_t task_id, const Route& first,
               const Route& second);
    void run_relay(const TaskRequest& request, TaskCallback& done, std::uint64_t task_id, const Route& first,
                   const Route& second);

    // lifecycle (supervisor.cpp)
    // Why an incarnation ended: its own exit (or a failure to start it), its zygote's death, or a stop.
    enum class EndCause { EXITED, ZYGOTE_DIED, STOPPED };
    void spawn(ChildSlot& slot);
    void event_loop();
    void on_event(const ZygoteEvent& e);
    void on_spawned(const ZygoteEvent& e);
    void on_exited(pid_t pid, int status);
    // Replaces a dead zygote with its standby and restarts every child, or calls on_fatal_.
    void on_zygote_died();
    void give_up(const std::string& why);
    // Ends the live incarnation (only if it is `generation`, when that is not 0): fails its tasks, decides and
    // logs what comes next. Waits while spawn still sets the incarnation up (Incarnation::setting_up); spawn itself
    // calls it only after its setup ends.
    void end_incarnation(ChildSlot& slot, const std::string& why, EndCause cause = EndCause::EXITED,
                         std::uint32_t generation = 0);
    // Records the state after a death (REQUIRES slot.mu) and returns the line to log.
    // `uptime`: how long the incarnation had been running (zero if it never came up).
    std::string after_death_locked(ChildSlot& slot, EndCause cause, pid_t pid, std::size_t failed_tasks,
                                   std::chrono::steady_clock::duration uptime);
    void schedule_restart(ChildSlot& slot, std::chrono::milliseconds delay);
    ChildSlot* take_due_restart();
    void changed() const;
    void housekeeping_loop();
    // Wakes the waiters on events_; may be called under any lock.
    void notify_events();
    void control_loop(ChildSlot& slot, Incarnation& inc);
    void serve_fd_request(const ChildSlot& slot, Incarnation& inc, const ipc::ChildMessage& request);
    // Dups of the parent's fds of `d` for `requester`, fetched once and kept until the buffer's release.
    worker::VmmFds reexported_fds(const BufferDescriptor& d, const std::string& requester);
    BufferDescriptor create_symmetric(const BufferRequest& request);
    BufferDescriptor create_remote_buffer(ChildSlot& slot, const BufferRequest& request, const std::string& chip);
    // Sends control frame `kernel` with `args` (for `target` below the node) to the link of remote node `slot` and
    // waits for its result.
    TaskResult remote_buffer_call(ChildSlot& slot, std::string_view kernel, const TaskArgs& args,
                                  const std::string& target = "");
    // Has each chip create its copy of the pending device buffer `d` (rank = index in `chips` when
    // symmetric), waits for the results and the fds, then commits it; on any failure retires the identity
    // and throws RequestError.
    void create_on_chips(const BufferDescriptor& d, const std::vector<Route>& chips, bool symmetric);
    void check_pe(const TaskRequest& request) const;
    void check_cuda_fault(const Route& route, const TaskRequest& request) const;

    // user modules (supervisor_modules.cpp)
    ModuleService::Host module_host();
    void check_module_kernel(const Route& route, const TaskRequest& request) const;
    void queue_module_replays_locked(ChildSlot& slot);

    // dispatch (supervisor_dispatch.cpp)
    Route resolve(const std::string& worker) const;
    // Like resolve(), and a nested node itself ("/node0") is a route too.
    Route resolve_any(const std::string& path) const;
    // Asks the nested supervisor of `inc` to restart its worker `target`. REQUIRES the slot's mu.
    static void send_worker_restart(Incarnation& inc, const std::string& target);
    void check_request(const Route& route, const TaskRequest& request) const;
    MappedArenas map_preloads();
    void check_buffer(const Route& route, const BufferDescriptor& d, std::size_t i, bool accepted) const;
    // A buffer of this supervisor's own, live, and `d` its registered descriptor; throws UNKNOWN_BUFFER,
    // STALE_BUFFER or INVALID_DESCRIPTOR naming argument `i`. With a route, returns whether its worker holds a
    // copy of the buffer (false only for a symmetric buffer whose world lacks it); without one, true.
    bool check_own_live(const BufferDescriptor& d, std::size_t i, bool accepted, const Route* route = nullptr) const;
    void check_remote_buffer(const Route& route, const BufferDescriptor& d, std::size_t i, bool accepted) const;
    // A remote host's buffer as a task sees it: its host (the remote node's path) when `d` names a live one and is
    // its registered descriptor; nullopt for an identity no remote host made. Throws STALE_BUFFER for one that is
    // lost, released, or (unless `accepted`) whose release has begun, and INVALID_DESCRIPTOR for a mismatch.
    std::optional<std::string> live_remote(const BufferDescriptor& d, std::size_t i, bool accepted) const;
    // UNREACHABLE_BUFFER unless route's worker reaches `d` (device memory: a chip of its backend's kind).
    void check_device_reach(const Route& route, const BufferDescriptor& d, std::size_t i) const;
    void enqueue(ChildSlot& slot, PendingTask task);
    // The task as its slot queues it; null (and `done` called) when it is refused at once.
    ChildSlot* prepare(TaskRequest& request, TaskCallback& done, PendingTask& task);
    // Queues `task` or collects its refusal in `rejected`. REQUIRES slot.mu; fill_locked is left to the caller.
    void enqueue_locked(ChildSlot& slot, PendingTask& task, std::vector<std::pair<TaskCallback, TaskResult>>& rejected);
    // Fails a task refused before it was queued, keeping the failure if it asked for that.
    void reject(std::uint64_t task_id, bool keep_failure, ErrorCode code, const std::string& message,
                TaskCallback& done);
    void completion_loop(ChildSlot& slot, Incarnation& inc);
    void notify_drain();
    bool harvest_locked(ChildSlot& slot, Incarnation& inc, std::vector<std::pair<TaskCallback, TaskResult>>& results);
    // Takes the task in flight at `it` off `slot` with its `result`, counted, for `results`; false when it failed.
    // REQUIRES slot.mu.
    bool take_result_locked(ChildSlot& slot, std::unordered_map<std::uint64_t, PendingTask>::iterator it,
                            TaskResult result, std::vector<std::pair<TaskCallback, TaskResult>>& results);
    void fill_locked(ChildSlot& slot);
    void arm_deadline_locked(ChildSlot& slot);
    void expire_deadlines();
    void fail_all_locked(ChildSlot& slot, ErrorCode code, const std::string& message,
                         std::vector<std::pair<TaskCallback, TaskResult>>& out);

    // ordered tasks (supervisor_order.cpp)
    // Keeps the failure of task `task_id` if it asked for that (TaskRequest::keep_failure).
    void note_failure(std::uint64_t task_id, bool keep_failure, ErrorCode code);
    void note_failure(const PendingTask& task, ErrorCode code) { note_failure(task.task_id, task.keep_failure, code); }
    // DEPENDENCY_FAILED, naming the first task of `after` that failed; nullopt when none did.
    std::optional<TaskResult> dependency_failure(std::uint64_t task_id, const std::vector<std::uint64_t>& after) const;
    // Fails every queued task of `slot` ordered after a failed one (transitively). REQUIRES slot.mu.
    void fail_ordered_pending_locked(ChildSlot& slot, std::vector<std::pair<TaskCallback, TaskResult>>& out);
    // The tasks of `task.after` still in `slot`'s mailbox, which its frame names; the rest have succeeded.
    // nullopt when more than a frame holds are still there. REQUIRES slot.mu.
    std::optional<std::vector<std::uint64_t>> frame_after_locked(const ChildSlot& slot, const PendingTask& task) const;

    SupervisorOptions options_;
    MappedArenas arenas_; // mapped before the launcher's zygote is forked; every process below inherits them
    std::shared_ptr<const Clock> clock_;
    std::unique_ptr<ChildLauncher> launcher_;
    BufferRegistry buffers_;
    std::vector<std::unique_ptr<ChildSlot>> slots_;
    std::atomic<std::uint64_t> next_task_id_{1};
    std::atomic<bool> stopping_{false};
    std::atomic<bool> zygote_lost_{false}; // the tree could not heal: every worker is dead
    std::atomic<bool> draining_{false};    // stop() waits for in-flight work
    bool stopped_ = false;

    // Bumped on slot state changes, restarts due, deadlines armed and (while draining) results: what start(),
    // stop() and the housekeeping thread wait on. Bumping takes no lock, so it is done under any mutex.
    ipc::EventCount events_;
    std::mutex events_mu_; // guards by_pid_
    std::map<pid_t, ChildSlot*> by_pid_;
    std::mutex restart_mu_; // guards restarts_due_; a leaf lock, taken under a slot's mu
    std::multimap<std::chrono::steady_clock::time_point, ChildSlot*> restarts_due_;
    std::thread event_thread_;
    std::thread housekeeping_thread_;
    std::shared_ptr<spdlog::logger> log_;
    RestartPolicy policy_;
    std::uint32_t zygote_failures_ = 0; // event thread only
    std::chrono::steady_clock::time_point zygote_since_;
    std::function<void()> on_change_;
    std::function<void(const std::string&)> on_fatal_;

    ParentLink* parent_ = nullptr;
    // Fds of the parent's device buffers, fetched once per child that asked: key = identity text + " " + path.
    std::mutex reexport_mu_;
    std::map<std::string, std::pair<CanonicalIdentity, worker::VmmFds>> reexports_;

    ModuleService modules_;

    // Relays waiting for their staging buffer (relay()), run in order.
    SerialWorker relays_;

    // Failures kept for the tasks ordered after them (TaskRequest::keep_failure), by task id, until
    // forget_failure. A leaf lock, taken under a slot's mu.
    mutable std::mutex failures_mu_;
    std::unordered_map<std::uint64_t, ErrorCode> kept_failures_;
};

// "args[I]": how a refusal names a task's I-th argument.
inline std::string arg_field(std::size_t i) {
    return "args[" + std::to_string(i) + "]";
}

// What a forked child of `options` runs (a worker loop, or a nested supervisor).
int run_child(const SupervisorOptions& options, const SpawnRequest& request, ipc::UniqueFd mailbox,
              ipc::UniqueFd control);

} // namespace canopy::daemon
