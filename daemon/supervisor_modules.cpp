// The supervisor's side of user modules: which children a ModuleService reaches and how, the replay into a
// child that comes up, and the submit-time checks of module kernels.
#include "daemon/supervisor.h"
#include "protocol/module_launch.h"

#include <future>

namespace canopy::daemon {
namespace {

// "sim chip /chip1", "sub /sub0", "cuda chip /node0/chip1".
std::string worker_words(ChildKind kind, const std::string& path) {
    switch (kind) {
    case ChildKind::SIM_CHIP:
        return "sim chip " + path;
    case ChildKind::CUDA_CHIP:
        return "cuda chip " + path;
    case ChildKind::SUB:
        return "sub " + path;
    case ChildKind::NODE:
        break;
    case ChildKind::REMOTE:
        return "remote node " + path;
    }
    return "supervisor " + path;
}

} // namespace

ModuleService::Host Supervisor::module_host() {
    ModuleService::Host host;
    host.targets = [this] {
        std::vector<ChildSlot*> targets;
        for (const auto& slot : slots_) {
            std::lock_guard lock(slot->mu);
            // A remote node counts only while its host is attached: a lost host may stay away for long, and
            // gets every module again when it comes back.
            const bool reachable = slot->spec.kind == ChildKind::REMOTE
                                       ? slot->state == WorkerState::RUNNING
                                       : slot->state != WorkerState::DEAD && slot->state != WorkerState::STOPPED;
            if (ModuleService::takes_modules(slot->spec) && reachable) {
                targets.push_back(slot.get());
            }
        }
        return targets;
    };
    host.send = [this](ChildSlot& child, ModuleFrame frame, TaskCallback done) {
        enqueue(child,
                PendingTask{next_task_id_++, std::move(frame.kernel), "", {}, std::move(frame.blob), std::move(done)});
    };
    host.release_everywhere = [this](const CanonicalIdentity& id) { broadcast_release(id); };
    return host;
}

ModuleInfo Supervisor::load_module(const std::string& name, std::vector<std::byte> image) {
    std::promise<ModuleLoadResult> promise;
    auto future = promise.get_future();
    load_module_async(name, std::move(image), [&promise](ModuleLoadResult r) { promise.set_value(std::move(r)); });
    ModuleLoadResult r = future.get();
    if (r.code != ErrorCode::OK) {
        throw RequestError(r.code, r.message);
    }
    return r.module;
}

// A child that takes modules gets every recorded one again, in name order, before anything queued.
void Supervisor::queue_module_replays_locked(ChildSlot& slot) {
    if (!ModuleService::takes_modules(slot.spec)) {
        return;
    }
    std::vector<PendingTask> replays;
    for (ModuleFrame& frame : modules_.replay_frames()) {
        replays.push_back(PendingTask{next_task_id_++, std::move(frame.kernel), "", {}, std::move(frame.blob), {}});
    }
    slot.pending.insert(slot.pending.begin(), std::make_move_iterator(replays.begin()),
                        std::make_move_iterator(replays.end()));
}

void Supervisor::check_module_kernel(const Route& route, const TaskRequest& request) const {
    const std::string path =
        (route.slot ? route.slot->path : std::string()) + (route.target.empty() ? "" : "/" + route.target);
    if (route.worker_kind != ChildKind::CUDA_CHIP) {
        throw RequestError(ErrorCode::UNKNOWN_KERNEL, worker_words(route.worker_kind, path) +
                                                          " cannot run module kernel " + request.kernel +
                                                          " (module kernels run on cuda chips)");
    }
    try {
        validate_module_kernel_name(request.kernel);
        validate_module_launch(request.launch, request.args.tensors.size(), request.args.scalars.size());
    } catch (const WireError& e) {
        throw RequestError(ErrorCode::BAD_REQUEST, request.kernel + ": " + e.what());
    }
    modules_.require_usable(std::string(module_of(request.kernel)));
}

} // namespace canopy::daemon
