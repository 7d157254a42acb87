#include "daemon/remote_tasks.h"
#include "daemon/supervisor.h"
#include "ipc/cpus.h"
#include "ipc/futex.h"
#include "protocol/builtin_launch.h"
#include "protocol/module_launch.h"
#include "worker/kernels/builtin.h"
#include "worker/worker_loop.h"

#include <algorithm>
#include <cstring>
#include <future>
#include <signal.h>
#include <thread>

namespace canopy::daemon {
namespace {

// Spin iterations of run() before it blocks: about 20 us, the cost of a futex wake on a busy machine.
constexpr std::uint32_t RUN_SPIN = 2000;
// Spin iterations of a completion thread waiting for a result, before it blocks.
constexpr std::uint32_t RESULT_SPIN = 2000;
// The same while a frame is in flight on a machine with CPUs to spare (a GPU host): up to about a millisecond,
// so that a result of a task of that length (a large reduction, a matmul) is taken without a futex wake, which
// after such an idle stretch costs 40-100 us. AdaptiveSpin shortens it for a worker whose tasks run longer.
constexpr std::uint32_t RESULT_SPIN_SPARE = 50000;

kernels::WorkerKind worker_kind(ChildKind kind) {
    return kind == ChildKind::SUB ? kernels::WorkerKind::SUB : kernels::WorkerKind::CHIP;
}

void check_access(const TensorArg& arg, std::size_t i) {
    const Access granted = arg.tensor.buffer.access;
    if (tag_reads(arg.tag) && !grants_read(granted)) {
        throw RequestError(ErrorCode::ACCESS_DENIED, arg_field(i) + ": " + to_string(arg.tag) +
                                                         " needs read access; the buffer grants " + to_string(granted));
    }
    if (tag_writes(arg.tag) && !grants_write(granted)) {
        throw RequestError(ErrorCode::ACCESS_DENIED, arg_field(i) + ": " + to_string(arg.tag) +
                                                         " needs write access; the buffer grants " +
                                                         to_string(granted));
    }
}

} // namespace

Supervisor::Route Supervisor::resolve(const std::string& worker) const {
    std::string_view rest = worker;
    while (!rest.empty() && rest.front() == '/') {
        rest.remove_prefix(1);
    }
    const auto slash = rest.find('/');
    const std::string_view head = rest.substr(0, slash);
    const std::string_view tail = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash + 1);
    for (const auto& slot : slots_) {
        if (slot->spec.name != head) {
            continue;
        }
        if (slot->spec.kind == ChildKind::REMOTE) {
            return resolve_remote(*slot, worker, tail);
        }
        if (slot->spec.kind != ChildKind::NODE) {
            if (!tail.empty()) {
                break;
            }
            return {slot.get(), "", slot->spec.kind, slot->spec.device};
        }
        if (tail.empty()) {
            throw RequestError(ErrorCode::UNKNOWN_WORKER,
                               "'" + worker + "' is a supervisor, not a worker; name one of its chips or subs");
        }
        const auto nested_head = tail.substr(0, tail.find('/'));
        for (const auto& child : slot->spec.node->children) {
            if (child.name == nested_head && child.kind != ChildKind::NODE && nested_head.size() == tail.size()) {
                return {slot.get(), std::string(tail), child.kind, child.device};
            }
        }
        break;
    }
    std::string known;
    for (const auto& slot : slots_) {
        known += (known.empty() ? "" : ", ") + slot->path;
    }
    throw RequestError(ErrorCode::UNKNOWN_WORKER, "no worker '" + worker + "' (children: " + known + ")");
}

std::string Supervisor::remote_down_locked(const ChildSlot& slot) {
    return "remote node " + slot.path + " is " + to_string(slot.state) +
           (slot.last_exit.empty() ? std::string() : " (" + slot.last_exit + ")") +
           "; its link reconnects with back-off";
}

// A worker of a remote node is one its host's last reported tree lists; while the link is down none is.
Supervisor::Route Supervisor::resolve_remote(ChildSlot& slot, const std::string& worker, std::string_view tail) const {
    if (tail.empty()) {
        throw RequestError(ErrorCode::UNKNOWN_WORKER,
                           "'" + worker + "' is a remote node, not a worker; name one of its chips or subs");
    }
    const std::string path = slot.path + "/" + std::string(tail);
    std::lock_guard lock(slot.mu);
    if (slot.state != WorkerState::RUNNING || !slot.live || !slot.live->reported) {
        throw RequestError(ErrorCode::WORKER_DIED, remote_down_locked(slot));
    }
    std::string known;
    for (const WorkerStatus& w : *slot.live->reported) {
        if (w.path == path) {
            const ChildKind kind = w.kind == "sub"       ? ChildKind::SUB
                                   : w.backend == "cuda" ? ChildKind::CUDA_CHIP
                                                         : ChildKind::SIM_CHIP;
            return {&slot, std::string(tail), kind, w.device};
        }
        known += (known.empty() ? "" : ", ") + w.path;
    }
    throw RequestError(ErrorCode::UNKNOWN_WORKER,
                       "no worker '" + worker + "' on remote node " + slot.path + " (its workers: " + known + ")");
}

Supervisor::Route Supervisor::resolve_any(const std::string& path) const {
    std::string_view name = path;
    while (!name.empty() && name.front() == '/') {
        name.remove_prefix(1);
    }
    for (const auto& slot : slots_) {
        if (slot->spec.name == name) {
            return {slot.get(), "", slot->spec.kind, slot->spec.device};
        }
    }
    return resolve(path);
}

void Supervisor::check_request(const Route& route, const TaskRequest& request) const {
    if (request.kernel.empty() || request.kernel.front() == '@' || request.kernel.size() >= KERNEL_NAME_BYTES) {
        throw RequestError(ErrorCode::UNKNOWN_KERNEL, "no kernel named '" + request.kernel + "'");
    }
    const bool across = crosses_hosts(request);
    // A task the service accepted (its dispatch) still reaches a buffer whose release began after it was accepted:
    // the release waits for it. A new task does not.
    const bool accepted = request.signature_checked;
    std::vector<kernels::BoundTensor> bound;
    for (std::size_t i = 0; i < request.args.tensors.size(); ++i) {
        const TensorArg& arg = request.args.tensors[i];
        try {
            validate_tensor(arg.tensor);
        } catch (const WireError& e) {
            throw RequestError(ErrorCode::INVALID_TENSOR, arg_field(i) + "." + e.field() + ": " + e.problem());
        }
        if (!is_valid(arg.tag)) {
            throw RequestError(ErrorCode::INVALID_TENSOR, arg_field(i) + ".tag: unknown tag");
        }
        if (across) {
            check_copy_side(arg.tensor.buffer, i, accepted);
        } else if (route.slot->spec.kind == ChildKind::REMOTE) {
            check_remote_buffer(route, arg.tensor.buffer, i, accepted);
        } else {
            check_buffer(route, arg.tensor.buffer, i, accepted);
        }
        check_access(arg, i);
        bound.push_back({&arg.tensor, arg.tag, nullptr});
    }
    if (is_module_kernel(request.kernel)) {
        check_module_kernel(route, request);
        return;
    }
    if (across) {
        check_copy_across(route, request);
    }
    check_pe(request);
    if (request.kernel == "illegal_address") {
        check_cuda_fault(route, request);
        return;
    }
    if (request.signature_checked) {
        return;
    }
    try {
        const kernels::KernelCall call{request.kernel, bound, request.args.scalars, nullptr,
                                       builtin_launch_flags(request.launch)};
        kernels::check_builtin(worker_kind(route.worker_kind), call, options_.fault_kernels);
    } catch (const kernels::KernelError& e) {
        throw RequestError(e.code(), e.what());
    }
}

std::optional<std::string> Supervisor::live_remote(const BufferDescriptor& d, std::size_t i, bool accepted) const {
    if (d.identity.owner_instance == buffers_.owner_instance()) {
        return std::nullopt;
    }
    std::string host;
    bool matches = false;
    const BufferLookup state = buffers_.inspect(
        d.identity,
        [&](const BufferInfo& info) {
            host = info.creator;
            matches = info.descriptor == d;
        },
        accepted);
    switch (state) {
    case BufferLookup::UNKNOWN:
        return std::nullopt;
    case BufferLookup::STALE:
        throw RequestError(
            ErrorCode::STALE_BUFFER,
            arg_field(i) + ": " +
                buffers_.stale_reason(d.identity).value_or("buffer " + to_string(d.identity) + " was released"));
    case BufferLookup::LIVE:
        break;
    }
    if (!matches) {
        throw RequestError(ErrorCode::INVALID_DESCRIPTOR,
                           arg_field(i) + ": descriptor does not match buffer " + to_string(d.identity));
    }
    return host;
}

// A task for remote node route.slot reaches the buffers its host made for this L4, and no other.
void Supervisor::check_remote_buffer(const Route& route, const BufferDescriptor& d, std::size_t i,
                                     bool accepted) const {
    if (const auto host = live_remote(d, i, accepted); host && *host == route.slot->path) {
        check_device_reach(route, d, i);
        return;
    }
    if (buffers_.lookup(d.identity) == BufferLookup::STALE) {
        throw RequestError(
            ErrorCode::STALE_BUFFER,
            arg_field(i) + ": " +
                buffers_.stale_reason(d.identity).value_or("buffer " + to_string(d.identity) + " was released"));
    }
    throw RequestError(ErrorCode::UNREACHABLE_BUFFER, arg_field(i) + ": buffer " + to_string(d.identity) +
                                                          " is not on the host of remote node " + route.slot->path +
                                                          ", which reaches only buffers of its own host");
}

bool Supervisor::check_own_live(const BufferDescriptor& d, std::size_t i, bool accepted, const Route* route) const {
    bool matches = false;
    bool reachable = true;
    const BufferLookup state = buffers_.inspect(
        d.identity,
        [&](const BufferInfo& info) {
            matches = info.descriptor == d;
            if (route != nullptr && !info.world.empty()) {
                reachable = route->slot != nullptr &&
                            std::find(info.world.begin(), info.world.end(), route->path()) != info.world.end();
            }
        },
        accepted);
    switch (state) {
    case BufferLookup::UNKNOWN:
        throw RequestError(ErrorCode::UNKNOWN_BUFFER, arg_field(i) + ": no buffer " + to_string(d.identity));
    case BufferLookup::STALE:
        throw RequestError(ErrorCode::STALE_BUFFER,
                           arg_field(i) + ": buffer " + to_string(d.identity) + " was released");
    case BufferLookup::LIVE:
        break;
    }
    if (!matches) {
        throw RequestError(ErrorCode::INVALID_DESCRIPTOR,
                           arg_field(i) + ": descriptor does not match buffer " + to_string(d.identity));
    }
    return reachable;
}

void Supervisor::check_buffer(const Route& route, const BufferDescriptor& d, std::size_t i, bool accepted) const {
    const bool ours = d.identity.owner_instance == buffers_.owner_instance();
    if (!ours) {
        if (const auto host = buffers_.remote_host(d.identity)) {
            throw RequestError(ErrorCode::UNREACHABLE_BUFFER,
                               arg_field(i) + ": buffer " + to_string(d.identity) + " is on the host of remote node " +
                                   *host + ", which " + (route.slot ? route.path() : std::string("?")) +
                                   " cannot reach");
        }
        if (const auto why = buffers_.stale_reason(d.identity)) {
            throw RequestError(ErrorCode::STALE_BUFFER, arg_field(i) + ": " + *why);
        }
    }
    if (ours) {
        if (!check_own_live(d, i, accepted, &route)) {
            throw RequestError(ErrorCode::UNREACHABLE_BUFFER, arg_field(i) + ": symmetric buffer " +
                                                                  to_string(d.identity) + " has no copy on " +
                                                                  (route.slot ? route.path() : std::string("?")));
        }
    } else if (options_.path == "/") {
        throw RequestError(ErrorCode::UNKNOWN_BUFFER, arg_field(i) + ": no buffer " + to_string(d.identity));
    }
    check_device_reach(route, d, i);
}

// The worker that runs a task over device memory (a chip of a nested node or of a remote node's host too) must be
// a chip of the backend's kind.
void Supervisor::check_device_reach(const Route& route, const BufferDescriptor& d, std::size_t i) const {
    if (AddressSpace{d.address_space} != AddressSpace::DEVICE) {
        return;
    }
    const bool matching = (Backend{d.backend} == Backend::SIM_VMM && route.worker_kind == ChildKind::SIM_CHIP) ||
                          (Backend{d.backend} == Backend::CUDA_VMM && route.worker_kind == ChildKind::CUDA_CHIP);
    if (!route.slot || !matching) {
        throw RequestError(ErrorCode::UNREACHABLE_BUFFER, arg_field(i) + ": " + to_string(Backend{d.backend}) +
                                                              " buffer cannot be reached from " +
                                                              (route.slot ? route.path() : std::string("?")));
    }
}

// illegal_address is the fault kernel of cuda chips alone: it writes through a bad device pointer so
// that the chip's CUDA context takes a sticky error. It takes no arguments.
void Supervisor::check_cuda_fault(const Route& route, const TaskRequest& request) const {
    if (!options_.fault_kernels) {
        throw RequestError(ErrorCode::UNKNOWN_KERNEL,
                           "illegal_address: fault kernels are disabled (testing.fault_kernels)");
    }
    if (route.worker_kind != ChildKind::CUDA_CHIP) {
        throw RequestError(ErrorCode::UNKNOWN_KERNEL, "illegal_address: only cuda chips offer it");
    }
    if (!request.args.tensors.empty() || !request.args.scalars.empty()) {
        throw RequestError(ErrorCode::BAD_REQUEST, "illegal_address: takes no arguments");
    }
}

// A constant PE argument (peer_read's int64 scalar) must name a rank of the symmetric buffer's world.
void Supervisor::check_pe(const TaskRequest& request) const {
    if (request.kernel != "peer_read" || request.args.tensors.empty() || request.args.scalars.empty()) {
        return;
    }
    const auto info = buffers_.find(request.args.tensors[0].tensor.buffer.identity);
    if (!info || info->world.empty()) {
        return; // the kernel check refuses peer_read over a buffer that is not symmetric
    }
    const ScalarArg& pe = request.args.scalars[0];
    const std::int64_t value = pe.to_int64();
    if (pe.kind != ScalarKind::INT64 || value < 0 || static_cast<std::uint64_t>(value) >= info->world.size()) {
        throw RequestError(ErrorCode::PE_OUT_OF_RANGE, "peer_read: pe " + std::to_string(value) +
                                                           " is out of range for a world of " +
                                                           std::to_string(info->world.size()));
    }
}

void Supervisor::check(const TaskRequest& request) const {
    check_request(route_of(request), request);
}

bool Supervisor::has_chip(ChildKind kind) const {
    for (const auto& slot : slots_) {
        if (slot->spec.kind == kind || (slot->spec.kind == ChildKind::NODE &&
                                        std::any_of(slot->spec.node->children.begin(), slot->spec.node->children.end(),
                                                    [&](const ChildSpec& c) { return c.kind == kind; }))) {
            return true;
        }
    }
    return false;
}

std::uint64_t Supervisor::submit(TaskRequest request, TaskCallback done) {
    PendingTask task;
    if (ChildSlot* slot = prepare(request, done, task)) {
        enqueue(*slot, std::move(task));
    }
    return task.task_id;
}

void Supervisor::submit_all(std::vector<std::pair<TaskRequest, TaskCallback>> tasks) {
    std::vector<std::pair<ChildSlot*, PendingTask>> queued;
    queued.reserve(tasks.size());
    for (auto& [request, done] : tasks) {
        PendingTask task;
        if (ChildSlot* slot = prepare(request, done, task)) {
            queued.emplace_back(slot, std::move(task));
        }
    }
    std::vector<std::pair<TaskCallback, TaskResult>> rejected;
    for (std::size_t first = 0; first < queued.size(); ++first) {
        ChildSlot* const slot = queued[first].first;
        if (slot == nullptr) {
            continue; // queued with an earlier group
        }
        std::lock_guard lock(slot->mu);
        for (std::size_t i = first; i < queued.size(); ++i) {
            if (queued[i].first == slot) {
                enqueue_locked(*slot, queued[i].second, rejected);
                queued[i].first = nullptr;
            }
        }
        fill_locked(*slot);
    }
    for (auto& [cb, result] : rejected) {
        if (cb) {
            cb(std::move(result));
        }
    }
}

ChildSlot* Supervisor::prepare(TaskRequest& request, TaskCallback& done, PendingTask& task) {
    const std::uint64_t task_id = request.id != 0 ? request.id : next_task_id_++;
    task.task_id = task_id;
    ChildSlot* slot = nullptr;
    try {
        const Route route = route_of(request);
        check_request(route, request);
        if (crosses_hosts(request)) {
            task.task_id = task_id;
            return route_across(request, done, task);
        }
        slot = route.slot;
        if (!request.after.empty() &&
            (route.slot->spec.kind == ChildKind::NODE || route.slot->spec.kind == ChildKind::REMOTE)) {
            throw RequestError(ErrorCode::BAD_REQUEST,
                               "a task for " + request.worker +
                                   " (below a nested or remote node) cannot be ordered after others");
        }
        task = PendingTask{task_id,
                           request.kernel,
                           route.target,
                           request.launch,
                           encode_task_args(request.args),
                           std::move(done),
                           request.timeout,
                           route.slot->spec.kind != ChildKind::NODE && route.slot->spec.kind != ChildKind::REMOTE,
                           std::move(request.after),
                           request.keep_failure,
                           request.group,
                           route.slot->spec.kind == ChildKind::REMOTE};
    } catch (const RequestError& e) {
        reject(task_id, request.keep_failure, e.code(), e.what(), done);
        return nullptr;
    } catch (const WireError& e) {
        reject(task_id, request.keep_failure, e.code(), e.what(), done);
        return nullptr;
    }
    return slot;
}

void Supervisor::reject(std::uint64_t task_id, bool keep_failure, ErrorCode code, const std::string& message,
                        TaskCallback& done) {
    note_failure(task_id, keep_failure, code);
    done(TaskResult{task_id, code, message, 0, 0});
}

void Supervisor::enqueue_locked(ChildSlot& slot, PendingTask& task,
                                std::vector<std::pair<TaskCallback, TaskResult>>& rejected) {
    if (slot.state == WorkerState::DEAD || slot.state == WorkerState::STOPPED || stopping_) {
        count_result(slot, task, ErrorCode::WORKER_DIED);
        note_failure(task, ErrorCode::WORKER_DIED);
        rejected.emplace_back(std::move(task.done),
                              TaskResult{task.task_id, ErrorCode::WORKER_DIED,
                                         "worker " + slot.path + " is " + to_string(slot.state) +
                                             (slot.last_exit.empty() ? "" : " (last exit: " + slot.last_exit + ")"),
                                         0, 0});
    } else if (slot.spec.kind == ChildKind::REMOTE && (slot.state != WorkerState::RUNNING || !slot.live)) {
        // A link without a session has nowhere to send it, and its host may stay away for long: a task, a buffer's
        // creation or release, a copy's leg for the host fails now rather than wait for a session that may not
        // come (its buffers would not be the new session's anyway).
        count_result(slot, task, ErrorCode::WORKER_DIED);
        note_failure(task, ErrorCode::WORKER_DIED);
        rejected.emplace_back(std::move(task.done),
                              TaskResult{task.task_id, ErrorCode::WORKER_DIED, remote_down_locked(slot), 0, 0});
    } else if (std::optional<TaskResult> failed = dependency_failure(task.task_id, task.after)) {
        count_result(slot, task, failed->code);
        note_failure(task, failed->code);
        rejected.emplace_back(std::move(task.done), std::move(*failed));
    } else {
        slot.pending.push_back(std::move(task));
    }
}

void Supervisor::enqueue(ChildSlot& slot, PendingTask task) {
    std::vector<std::pair<TaskCallback, TaskResult>> rejected;
    {
        std::lock_guard lock(slot.mu);
        enqueue_locked(slot, task, rejected);
        fill_locked(slot);
    }
    for (auto& [cb, result] : rejected) {
        if (cb) {
            cb(std::move(result));
        }
    }
}

TaskResult Supervisor::run(TaskRequest request) {
    // The caller spins briefly before it blocks, like the mailbox's own waits: a short task's result then
    // reaches it without a futex wake of this thread (several microseconds).
    struct Rendezvous {
        std::atomic<bool> ready{false};
        TaskResult result;
        std::mutex mu;
        std::condition_variable cv;
    };
    auto meeting = std::make_shared<Rendezvous>();
    submit(std::move(request), [meeting](TaskResult r) {
        meeting->result = std::move(r);
        {
            std::lock_guard lock(meeting->mu);
            meeting->ready.store(true, std::memory_order_release);
        }
        meeting->cv.notify_one();
    });
    const std::uint32_t spin = ipc::spare_cpus() ? RESULT_SPIN_SPARE : RUN_SPIN;
    for (std::uint32_t i = 0; i < spin && !meeting->ready.load(std::memory_order_acquire); ++i) {
        ipc::spin_pause(i);
    }
    std::unique_lock lock(meeting->mu);
    meeting->cv.wait(lock, [&] { return meeting->ready.load(std::memory_order_acquire); });
    return std::move(meeting->result);
}

void Supervisor::fill_locked(ChildSlot& slot) {
    if (slot.state != WorkerState::RUNNING || !slot.live) {
        return;
    }
    Incarnation& inc = *slot.live;
    ipc::MailboxParent& mailbox = *inc.mailbox;
    while (!slot.pending.empty()) {
        PendingTask& t = slot.pending.front();
        if (t.remote_call) {
            // A remote node holds as many tasks at a time as a mailbox does. A node runs only once its stream is
            // open (the link's READY).
            if (!inc.tasks || slot.in_flight.size() >= MAILBOX_FRAMES) {
                break;
            }
            const std::uint64_t call = ++inc.last_call;
            inc.tasks->send(RemoteCall{call, t.task_id, t.kernel, t.target, t.blob, t.launch,
                                       static_cast<std::uint32_t>(t.timeout.count())});
            slot.in_flight.emplace(call, std::move(t));
            slot.pending.pop_front();
            continue;
        }
        if (!mailbox.can_submit()) {
            break;
        }
        // A task ordered after more tasks than a frame names waits until enough of them have finished.
        const std::optional<std::vector<std::uint64_t>> after = frame_after_locked(slot, t);
        if (!after) {
            break;
        }
        const auto nested_timeout = t.enforce_timeout ? 0 : static_cast<std::uint32_t>(t.timeout.count());
        const std::uint64_t dispatch =
            mailbox.submit({t.task_id, t.kernel, t.target, t.launch, t.blob, nested_timeout, *after});
        slot.in_flight.emplace(dispatch, std::move(t));
        slot.pending.pop_front();
    }
    arm_deadline_locked(slot);
}

void Supervisor::arm_deadline_locked(ChildSlot& slot) {
    if (slot.in_flight.empty()) {
        slot.deadline = Clock::time_point::max();
        return;
    }
    // The oldest task in flight is normally the mailbox's oldest frame not yet collected.
    auto running_it = slot.live && slot.live->mailbox->in_flight() > 0
                          ? slot.in_flight.find(slot.live->mailbox->oldest_in_flight())
                          : slot.in_flight.end();
    if (running_it == slot.in_flight.end()) {
        running_it = std::min_element(slot.in_flight.begin(), slot.in_flight.end(),
                                      [](const auto& a, const auto& b) { return a.first < b.first; });
    }
    const std::uint64_t oldest = running_it->first;
    if (oldest == slot.oldest_dispatch && slot.deadline != Clock::time_point::max()) {
        return;
    }
    slot.oldest_dispatch = oldest;
    const PendingTask& running = running_it->second;
    const bool timed = running.enforce_timeout && running.timeout.count() > 0;
    slot.deadline = timed ? clock_->now() + running.timeout : Clock::time_point::max();
    if (timed) {
        events_.bump(); // the housekeeping thread waits for the new deadline
    }
}

// Takes every published result of `inc` and refills its mailbox. REQUIRES slot.mu, with slot.live == &inc.
// A poisoned mailbox (recorded in last_exit) gets its child killed, once; the exit event then fails the
// in-flight tasks and restarts the child.
bool Supervisor::harvest_locked(ChildSlot& slot, Incarnation& inc,
                                std::vector<std::pair<TaskCallback, TaskResult>>& results) {
    bool took = false;
    bool failed = false;
    try {
        while (auto c = inc.mailbox->poll()) {
            took = true;
            auto it = slot.in_flight.find(c->dispatch_id);
            if (it == slot.in_flight.end()) {
                continue;
            }
            failed |= !take_result_locked(
                slot, it, TaskResult{c->task_id, c->code, std::move(c->message), c->start_ns, c->end_ns}, results);
        }
        if (failed) {
            fail_ordered_pending_locked(slot, results);
        }
        if (took) {
            // Frames were freed. When the oldest task was among them, the next one's deadline counts from now; a
            // later task taken before it (a node's results come in any order) leaves the oldest one's deadline.
            if (slot.in_flight.find(slot.oldest_dispatch) == slot.in_flight.end()) {
                slot.deadline = Clock::time_point::max();
            }
            fill_locked(slot);
        }
        return true;
    } catch (const ipc::MailboxPoisoned& e) {
        slot.fatal = true;
        slot.last_exit = "fatal: mailbox poisoned: " + std::string(e.what());
        if (!inc.poison_killed && inc.pid > 0) {
            inc.poison_killed = true;
            launcher_->kill(inc.pid, SIGKILL); // under slot.mu with slot.live == &inc: the pid is not reaped yet
        }
        return false;
    }
}

bool Supervisor::take_result_locked(ChildSlot& slot, std::unordered_map<std::uint64_t, PendingTask>::iterator it,
                                    TaskResult result, std::vector<std::pair<TaskCallback, TaskResult>>& results) {
    const ErrorCode code = result.code;
    count_result(slot, it->second, code);
    if (code != ErrorCode::OK) {
        note_failure(it->second, code);
    }
    results.emplace_back(std::move(it->second.done), std::move(result));
    slot.in_flight.erase(it);
    return code == ErrorCode::OK;
}

// The one owner of the results of `inc`'s mailbox: nothing else polls it while the incarnation lives (after
// its end, end_incarnation drains what is left, with this thread joined). Each turn reads the mailbox's activity
// word before it harvests, so a result published after the read changes the word and the wait returns; one
// published before is taken by the harvest. No result can be left behind a sleeping owner.
void Supervisor::completion_loop(ChildSlot& slot, Incarnation& inc) {
    if (options_.completion_thread_started) {
        options_.completion_thread_started(slot.path);
    }
    std::vector<std::pair<TaskCallback, TaskResult>> results;
    for (;;) {
        const std::uint32_t seen = inc.mailbox->activity();
        bool poisoned = false;
        bool busy = false;
        {
            std::lock_guard lock(slot.mu);
            if (slot.live.get() != &inc) {
                return;
            }
            poisoned = !harvest_locked(slot, inc, results);
            busy = inc.mailbox->in_flight() > 0; // a remote node's tasks complete on its task stream's thread
        }
        for (auto& [done, result] : results) {
            if (done) {
                done(std::move(result));
            }
        }
        if (!results.empty()) {
            notify_drain();
        }
        results.clear();
        if (poisoned || inc.ended.load(std::memory_order_acquire)) {
            return; // a poisoned mailbox: harvest_locked killed the child, and its exit event ends this incarnation
        }
        // With a frame in flight, or CPUs to spare, it spins first while recent waits ended soon (a client
        // submitting task after task), then blocks. With nothing in flight on a machine of few CPUs it blocks at
        // once: its spin would take a CPU from the io thread and the worker. A submit into the empty mailbox
        // wakes a blocked wait, so that it spins while that frame runs.
        inc.mailbox->wait_activity(seen, busy && ipc::spare_cpus()   ? RESULT_SPIN_SPARE
                                         : busy || ipc::spare_cpus() ? RESULT_SPIN
                                                                     : 0);
    }
}

// Only a draining stop() waits for completions: outside a stop a result wakes nobody (the housekeeping thread
// also waits on events_).
void Supervisor::notify_drain() {
    if (draining_.load(std::memory_order_seq_cst)) {
        events_.bump();
    }
}

void count_result(ChildSlot& slot, const PendingTask& task, ErrorCode code) {
    if (!task.kernel.empty() && task.kernel.front() == '@') {
        return;
    }
    (code == ErrorCode::OK ? slot.tasks_done : slot.tasks_failed)++;
    if (!task.target.empty()) {
        auto& counts = slot.nested_counts[task.target];
        (code == ErrorCode::OK ? counts.first : counts.second)++;
    }
}

void Supervisor::fail_all_locked(ChildSlot& slot, ErrorCode code, const std::string& message,
                                 std::vector<std::pair<TaskCallback, TaskResult>>& out) {
    for (auto& task : slot.pending) {
        count_result(slot, task, code);
        note_failure(task, code);
        out.emplace_back(std::move(task.done), TaskResult{task.task_id, code, message, 0, 0});
    }
    slot.pending.clear();
}

std::size_t Supervisor::withdraw(std::uint64_t group, const std::string& why) {
    if (group == 0) {
        return 0;
    }
    std::vector<std::pair<TaskCallback, TaskResult>> out;
    for (auto& slot : slots_) {
        std::lock_guard lock(slot->mu);
        for (auto it = slot->pending.begin(); it != slot->pending.end();) {
            if (it->group != group) {
                ++it;
                continue;
            }
            count_result(*slot, *it, ErrorCode::CANCELLED);
            note_failure(*it, ErrorCode::CANCELLED);
            out.emplace_back(std::move(it->done), TaskResult{it->task_id, ErrorCode::CANCELLED, why, 0, 0});
            it = slot->pending.erase(it);
        }
    }
    for (auto& [cb, result] : out) {
        if (cb) {
            cb(std::move(result));
        }
    }
    return out.size();
}

void Supervisor::submit_control(const std::string& worker, std::string kernel, std::vector<std::byte> blob,
                                TaskCallback done) {
    const Route route = resolve(worker);
    enqueue(*route.slot, PendingTask{next_task_id_++,
                                     std::move(kernel),
                                     route.target,
                                     {},
                                     std::move(blob),
                                     std::move(done),
                                     std::chrono::milliseconds(0),
                                     true});
}

void Supervisor::broadcast_release(const CanonicalIdentity& id) {
    {
        std::lock_guard lock(reexport_mu_);
        std::erase_if(reexports_, [&](const auto& entry) {
            return same_slot(entry.second.first, id) && entry.second.first.generation <= id.generation;
        });
    }
    std::vector<std::byte> blob(sizeof id);
    std::memcpy(blob.data(), &id, sizeof id);
    for (auto& slot : slots_) {
        std::lock_guard lock(slot->mu);
        if (slot->state == WorkerState::DEAD || slot->state == WorkerState::STOPPED) {
            continue;
        }
        slot->pending.push_back(PendingTask{next_task_id_++, "@release", "", {}, blob, {}});
        fill_locked(*slot);
    }
}

} // namespace canopy::daemon
