#include "daemon/supervisor.h"

namespace canopy::daemon {
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
        return kind != ChildKind::NODE;
    }
    return false;
}

} // namespace

BufferDescriptor Supervisor::create_buffer(const BufferRequest& request) {
    if (request.nbytes == 0) {
        throw RequestError(ErrorCode::BAD_REQUEST, "buffer size must be > 0");
    }
    if (request.backend == Backend::FORK_SHM || request.backend == Backend::FORK_COW) {
        throw RequestError(ErrorCode::BAD_REQUEST, std::string(to_string(request.backend)) +
                                                       " arenas come from the config's preload list");
    }
    ChildSlot* on = nullptr;
    if (!request.on.empty() && request.on != "/" && request.on != options_.path) {
        on = resolve(request.on).slot;
        if (on->spec.kind == ChildKind::NODE) {
            throw RequestError(ErrorCode::BAD_REQUEST, "buffers of a nested node are created by that node");
        }
    }
    bool consumer = false;
    for (const auto& slot : slots_) {
        if (on != nullptr && slot.get() != on) {
            continue;
        }
        std::lock_guard lock(slot->mu);
        const bool alive = slot->state != WorkerState::DEAD && slot->state != WorkerState::STOPPED;
        consumer = consumer || (alive && consumes(slot->spec.kind, request.backend));
        if (consumer && on == nullptr && request.backend != Backend::POSIX_SHM) {
            on = slot.get();
        }
    }
    if (!consumer) {
        throw RequestError(ErrorCode::NO_CONSUMER, std::string("no live child of ") + options_.path +
                                                       (on ? " named " + on->path : std::string()) + " can consume a " +
                                                       to_string(request.backend) + " buffer");
    }
    switch (request.backend) {
    case Backend::POSIX_SHM:
        return buffers_.create_posix_shm(request.nbytes, request.access, options_.path);
    case Backend::SIM_VMM:
        return buffers_.create_sim_vmm(request.nbytes, request.access, on->spec.device, on->path);
    default:
        break;
    }
    throw RequestError(ErrorCode::UNREACHABLE_BUFFER,
                       std::string(to_string(request.backend)) + " buffers are created by cuda chip workers, which "
                                                                 "this build does not run yet");
}

std::optional<std::string> Supervisor::release_buffer(const CanonicalIdentity& id) {
    switch (buffers_.lookup(id)) {
    case BufferLookup::UNKNOWN:
        throw RequestError(ErrorCode::UNKNOWN_BUFFER, "no buffer " + to_string(id));
    case BufferLookup::STALE:
        throw RequestError(ErrorCode::STALE_BUFFER, "buffer " + to_string(id) + " was already released");
    case BufferLookup::LIVE:
        break;
    }
    auto failure = buffers_.release(id);
    broadcast_release(id);
    return failure;
}

std::vector<WorkerStatus> Supervisor::status() const {
    std::vector<WorkerStatus> out;
    const auto now = std::chrono::steady_clock::now();
    for (const auto& slot : slots_) {
        std::lock_guard lock(slot->mu);
        WorkerStatus s;
        s.path = slot->path;
        s.kind = to_string(slot->spec.kind);
        s.backend = slot->spec.kind == ChildKind::CUDA_CHIP ? "cuda"
                    : slot->spec.kind == ChildKind::SIM_CHIP ? "sim"
                                                              : "";
        s.device = slot->spec.device;
        s.pid = slot->live ? slot->live->pid : -1;
        s.state = slot->state;
        s.restarts = slot->restarts;
        s.tasks_done = slot->tasks_done;
        s.tasks_failed = slot->tasks_failed;
        s.last_exit = slot->last_exit;
        if (slot->state == WorkerState::RUNNING) {
            s.uptime_s = std::chrono::duration<double>(now - slot->running_since).count();
        }
        out.push_back(std::move(s));
    }
    return out;
}

} // namespace canopy::daemon
