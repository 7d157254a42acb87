// Buffers of this supervisor: host buffers it creates itself, device buffers (plain and symmetric) that its chips
// create and hand over by fd, and releases, which every child hears of. The registry (daemon/buffer_registry.h)
// keeps identities, the journal and the fd rendezvous; this file routes each creation to the chips that make it.
#include "daemon/remote_call.h"
#include "daemon/remote_link.h"
#include "daemon/supervisor.h"
#include "ipc/child_message.h"
#include "ipc/fd_passing.h"

#include <algorithm>
#include <future>
#include <map>
#include <memory>

namespace canopy::daemon {
static_assert(MAX_REMOTE_WORLD == MAX_WORLD);
namespace {

bool consumes(ChildKind kind, Backend backend) {
    switch (backend) {
    case Backend::POSIX_SHM:
        return true; // chips, subs and nested supervisors all map shm by name
    case Backend::SIM_VMM:
        return kind == ChildKind::SIM_CHIP;
    case Backend::CUDA_VMM:
        return kind == ChildKind::CUDA_CHIP;
    case Backend::FORK_SHM:
    case Backend::FORK_COW:
        return true; // inherited at fork by every process below the root
    }
    return false;
}

} // namespace

BufferDescriptor Supervisor::create_buffer(const BufferRequest& request) {
    if (request.nbytes == 0) {
        throw RequestError(ErrorCode::BAD_REQUEST, "buffer size must be > 0");
    }
    if (request.backend == Backend::FORK_SHM || request.backend == Backend::FORK_COW) {
        throw RequestError(ErrorCode::BAD_REQUEST,
                           std::string(to_string(request.backend)) + " arenas come from the config's preload list");
    }
    if (!request.world.empty()) {
        return create_symmetric(request);
    }
    if (!request.on.empty() && request.on != "/" && request.on != options_.path) {
        const Route route = resolve_any(request.on);
        if (route.slot->spec.kind == ChildKind::REMOTE) {
            const bool device = request.backend == Backend::SIM_VMM || request.backend == Backend::CUDA_VMM;
            if (route.target.empty() ? request.backend != Backend::POSIX_SHM
                                     : !device || !consumes(route.worker_kind, request.backend)) {
                throw RequestError(ErrorCode::BAD_REQUEST, "a buffer on remote node " + route.slot->path +
                                                               " is a posix_shm buffer of its host (--on " +
                                                               route.slot->spec.name +
                                                               ") or the device memory of one of its chips (--on " +
                                                               route.slot->spec.name + "/chip0 --backend vmm); got " +
                                                               to_string(request.backend) + " on " + route.path());
            }
            return create_remote_buffer(*route.slot, request, route.target);
        }
    }
    if (request.backend == Backend::POSIX_SHM) {
        if (!request.on.empty() && request.on != "/" && request.on != options_.path &&
            resolve(request.on).slot->spec.kind == ChildKind::NODE) {
            throw RequestError(ErrorCode::BAD_REQUEST, "shm buffers of a nested node are created by that node");
        }
        bool consumer = false;
        for (const auto& slot : slots_) {
            std::lock_guard lock(slot->mu);
            consumer = consumer || (slot->state != WorkerState::DEAD && slot->state != WorkerState::STOPPED);
        }
        if (!consumer) {
            throw RequestError(ErrorCode::NO_CONSUMER,
                               std::string("no live child of ") + options_.path + " can consume a posix_shm buffer");
        }
        return buffers_.create_posix_shm(request.nbytes, request.access, options_.path);
    }
    // A device buffer is made by the chip named (a chip of a nested node too), or by the first live chip that
    // consumes the backend.
    std::optional<Route> chip;
    if (!request.on.empty()) {
        chip = resolve(request.on);
    } else {
        for (const auto& slot : slots_) {
            if (slot->spec.kind != ChildKind::NODE && consumes(slot->spec.kind, request.backend)) {
                chip = Route{slot.get(), "", slot->spec.kind, slot->spec.device};
                break;
            }
        }
    }
    const bool alive = chip && [&] {
        std::lock_guard lock(chip->slot->mu);
        return chip->slot->state != WorkerState::DEAD && chip->slot->state != WorkerState::STOPPED;
    }();
    if (!alive || !consumes(chip->worker_kind, request.backend)) {
        throw RequestError(ErrorCode::NO_CONSUMER, std::string("no live child of ") + options_.path +
                                                       (chip ? " named " + chip->path() : std::string()) +
                                                       " can consume a " + to_string(request.backend) + " buffer");
    }
    const BufferDescriptor d =
        buffers_.begin_vmm(request.backend, request.nbytes, request.access, chip->device, {}, chip->path());
    create_on_chips(d, {*chip}, false);
    return d;
}

void Supervisor::create_on_chips(const BufferDescriptor& d, const std::vector<Route>& chips, bool symmetric) {
    // Every chip creates its copy at once; the fds arrive over the control sockets (relayed by nested
    // supervisors) before or soon after the frames complete.
    std::vector<std::future<TaskResult>> results;
    for (std::size_t rank = 0; rank < chips.size(); ++rank) {
        TaskArgs args;
        // The tensor carries the descriptor; the chip reads no element of it.
        args.tensors.push_back({make_tensor(d, DataType::UINT8, {1}), TensorTag::OUTPUT});
        if (symmetric) {
            args.scalars.push_back(ScalarArg::i64(static_cast<std::int64_t>(rank)));
        }
        auto promise = std::make_shared<std::promise<TaskResult>>();
        results.push_back(promise->get_future());
        enqueue(*chips[rank].slot, PendingTask{next_task_id_++,
                                               "@vmm_create",
                                               chips[rank].target,
                                               {},
                                               encode_task_args(args),
                                               [promise](TaskResult r) { promise->set_value(std::move(r)); },
                                               CREATE_TIMEOUT,
                                               true});
    }
    std::optional<RequestError> failure;
    for (std::size_t rank = 0; rank < chips.size(); ++rank) {
        const TaskResult r = results[rank].get();
        if (!r.ok() && !failure) {
            failure.emplace(
                r.code == ErrorCode::KERNEL_FAILED || r.code == ErrorCode::BAD_REQUEST ? r.code
                                                                                       : ErrorCode::UNREACHABLE_BUFFER,
                chips[rank].path() + " could not create its copy of " + to_string(d.identity) + ": " + r.message);
        }
    }
    if (!failure && !buffers_.wait_fds(d.identity, CREATE_TIMEOUT)) {
        failure.emplace(ErrorCode::UNREACHABLE_BUFFER,
                        "the chips of " + to_string(d.identity) + " did not hand over its file descriptors");
    }
    if (failure) {
        buffers_.abort_vmm(d.identity);
        broadcast_release(d.identity); // chips that already mapped a copy drop it
        throw *failure;
    }
    buffers_.commit_vmm(d.identity);
}

BufferDescriptor Supervisor::create_symmetric(const BufferRequest& request) {
    if (request.backend != Backend::SIM_VMM && request.backend != Backend::CUDA_VMM) {
        throw RequestError(ErrorCode::BAD_REQUEST, std::string("symmetric buffers of backend ") +
                                                       to_string(request.backend) + " are not available");
    }
    if (request.world.size() > MAX_WORLD) {
        throw RequestError(ErrorCode::BAD_REQUEST, "a world has at most " + std::to_string(MAX_WORLD) + " chips");
    }
    std::vector<std::string> paths;
    std::vector<Route> chips;
    // A world of one remote host's chips is made by that host.
    const Route first = resolve(request.world.front());
    if (first.slot->spec.kind == ChildKind::REMOTE) {
        std::string targets;
        for (const std::string& chip : request.world) {
            const Route route = resolve(chip);
            if (route.slot != first.slot) {
                throw RequestError(ErrorCode::BAD_REQUEST, "a symmetric buffer's world lies on one host; " +
                                                               route.path() + " is not on the host of remote node " +
                                                               first.slot->path);
            }
            targets += (targets.empty() ? "" : ",") + route.target;
        }
        if (targets.size() >= TARGET_PATH_BYTES) {
            throw RequestError(ErrorCode::BAD_REQUEST, "the world's chip names (" + targets + ") exceed " +
                                                           std::to_string(TARGET_PATH_BYTES - 1) + " bytes");
        }
        return create_remote_buffer(*first.slot, request, targets);
    }
    for (const std::string& chip : request.world) {
        const Route route = resolve(chip);
        if (route.slot->spec.kind == ChildKind::REMOTE) {
            throw RequestError(ErrorCode::BAD_REQUEST, "a symmetric buffer's world lies on one host; " + route.path() +
                                                           " is on the host of remote node " + route.slot->path + ", " +
                                                           first.path() + " is not");
        }
        if (std::find(paths.begin(), paths.end(), route.path()) != paths.end()) {
            throw RequestError(ErrorCode::BAD_REQUEST, "'" + chip + "' appears twice in the world");
        }
        std::lock_guard lock(route.slot->mu);
        const bool alive = route.slot->state != WorkerState::DEAD && route.slot->state != WorkerState::STOPPED;
        if (!alive || !consumes(route.worker_kind, request.backend)) {
            throw RequestError(ErrorCode::NO_CONSUMER,
                               route.path() + " cannot hold a copy of a " + to_string(request.backend) + " buffer");
        }
        paths.push_back(route.path());
        chips.push_back(route);
    }
    const BufferDescriptor d = buffers_.begin_vmm(request.backend, request.nbytes, request.access, chips.front().device,
                                                  std::move(paths), options_.path);
    create_on_chips(d, chips, true);
    return d;
}

// A buffer on the host of remote node `slot`, made by the node for the link's session: POSIX_SHM, or in the device
// memory of its chip `chip`, or, for a symmetric buffer, of its chips `chip` names joined by commas.
BufferDescriptor Supervisor::create_remote_buffer(ChildSlot& slot, const BufferRequest& request,
                                                  const std::string& chip) {
    TaskArgs args;
    args.scalars.push_back(ScalarArg::i64(static_cast<std::int64_t>(request.nbytes)));
    args.scalars.push_back(ScalarArg::i64(static_cast<std::int64_t>(request.access)));
    if (!request.world.empty()) {
        args.scalars.push_back(ScalarArg::i64(1)); // `chip` lists a symmetric buffer's world
    }
    std::uint32_t generation = 0;
    {
        std::lock_guard lock(slot.mu);
        generation = slot.live ? slot.live->generation : 0;
    }
    const TaskResult r = remote_buffer_call(slot, REMOTE_BUFFER_CREATE, args, chip);
    if (!r.ok()) {
        throw RequestError(r.code, "remote node " + slot.path + " could not create the buffer: " + r.message);
    }
    const BufferDescriptor d = remote_buffer_descriptor(r.message, "remote node " + slot.path);
    if (Backend{d.backend} != request.backend || d.nbytes != request.nbytes || Access{d.access} != request.access ||
        d.identity.owner_instance == buffers_.owner_instance()) {
        throw RequestError(ErrorCode::INVALID_DESCRIPTOR, "remote node " + slot.path + " answered a creation of " +
                                                              std::to_string(request.nbytes) +
                                                              " bytes with a descriptor of another buffer");
    }
    std::vector<std::string> world; // resolved before the slot's lock, which resolving a remote path takes
    for (const std::string& rank : request.world) {
        world.push_back(resolve(rank).path());
    }
    {
        // Registered under the slot's lock, which the end of the link's incarnation takes to mark the host's buffers
        // stale: a session that ended after the node made the buffer (and released it with the session) never leaves
        // it registered as live.
        std::lock_guard lock(slot.mu);
        if (!slot.live || slot.live->generation != generation || slot.state != WorkerState::RUNNING) {
            throw RequestError(ErrorCode::WORKER_DIED,
                               "remote node " + slot.path + " lost its session while the buffer was created" +
                                   (slot.last_exit.empty() ? std::string() : " (" + slot.last_exit + ")") +
                                   "; the host released it");
        }
        buffers_.add_remote(d, slot.path, std::move(world));
    }
    log_->info("{}: buffer {} ({} bytes) created on its host", slot.path, to_string(d.identity), d.nbytes);
    return d;
}

TaskResult Supervisor::remote_buffer_call(ChildSlot& slot, std::string_view kernel, const TaskArgs& args,
                                          const std::string& target) {
    auto promise = std::make_shared<std::promise<TaskResult>>();
    auto result = promise->get_future();
    enqueue(slot, PendingTask{next_task_id_++,
                              std::string(kernel),
                              target,
                              {},
                              encode_task_args(args),
                              [promise](TaskResult r) { promise->set_value(std::move(r)); },
                              CREATE_TIMEOUT,
                              true});
    return result.get();
}

namespace {

// Throws what a release of a buffer that is not live is: UNKNOWN_BUFFER or STALE_BUFFER.
void require_live(const BufferRegistry& buffers, const CanonicalIdentity& id) {
    switch (buffers.lookup(id)) {
    case BufferLookup::UNKNOWN:
        throw RequestError(ErrorCode::UNKNOWN_BUFFER, "no buffer " + to_string(id));
    case BufferLookup::STALE:
        if (const auto why = buffers.stale_reason(id)) {
            throw RequestError(ErrorCode::STALE_BUFFER, *why);
        }
        throw RequestError(ErrorCode::STALE_BUFFER, "buffer " + to_string(id) + " was already released");
    case BufferLookup::LIVE:
        break;
    }
}

} // namespace

void Supervisor::begin_release(const CanonicalIdentity& id) {
    try {
        if (buffers_.begin_release(id)) {
            return;
        }
    } catch (const std::invalid_argument& e) {
        throw RequestError(ErrorCode::BAD_REQUEST, e.what());
    }
    require_live(buffers_, id); // not live, or its release begun already: says which
}

std::optional<std::string> Supervisor::release_buffer(const CanonicalIdentity& id) {
    if (!buffers_.releasing(id)) {
        require_live(buffers_, id);
    }
    if (const auto host = buffers_.remote_host(id)) {
        const std::optional<BufferInfo> info = buffers_.find(id);
        if (!info) {
            require_live(buffers_, id); // the host was lost since: says why the buffer is stale
            throw RequestError(ErrorCode::STALE_BUFFER, "buffer " + to_string(id) + " was released");
        }
        const BufferDescriptor d = info->descriptor;
        TaskArgs args;
        args.tensors.push_back({make_tensor(d, DataType::UINT8, {1}), TensorTag::INOUT});
        const TaskResult r = remote_buffer_call(*resolve_any(*host).slot, REMOTE_BUFFER_RELEASE, args);
        if (!r.ok()) {
            throw RequestError(r.code, "remote node " + *host + " could not release buffer " + to_string(id) + ": " +
                                           r.message);
        }
        buffers_.forget_remote(id);
        return r.message.empty() ? std::nullopt : std::optional<std::string>(r.message);
    }
    std::optional<std::string> failure;
    try {
        failure = buffers_.release(id);
    } catch (const std::invalid_argument& e) {
        throw RequestError(ErrorCode::BAD_REQUEST, e.what());
    }
    broadcast_release(id);
    return failure;
}

} // namespace canopy::daemon
