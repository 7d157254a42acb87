// User modules (docs/modules.md): the supervisor's module table, the @module_load frames that carry an image to
// every cuda chip and nested supervisor, their replay into a restarted one, and the submit-time checks of module
// kernels.
#include "daemon/supervisor.h"
#include "ipc/mapped_region.h"
#include "ipc/sys_error.h"
#include "protocol/module_launch.h"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <future>
#include <sys/mman.h>

namespace canopy::daemon {
namespace {

[[noreturn]] void bad(const std::string& message) {
    throw RequestError(ErrorCode::BAD_REQUEST, message);
}

bool alive(const ChildSlot& slot) {
    return slot.state != WorkerState::DEAD && slot.state != WorkerState::STOPPED;
}

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
    }
    return "supervisor " + path;
}

void check_image(const std::string& name, std::span<const std::byte> image) {
    if (!is_valid_module_name(name)) {
        bad("module name '" + name + "': must match [A-Za-z_][A-Za-z0-9_]{0,39}");
    }
    if (image.empty()) {
        bad("module " + name + ": the image is empty");
    }
    if (image.size() > MAX_MODULE_IMAGE_BYTES) {
        bad("module " + name + ": the image is " + std::to_string(image.size()) + " bytes, at most " +
            std::to_string(MAX_MODULE_IMAGE_BYTES) + " (64 MiB)");
    }
    if (!detect_module_format(image)) {
        bad("module " + name +
            ": the image is neither PTX (text with .version and .target directives) nor a cubin/fatbin (ELF or "
            "fatbin magic)");
    }
}

// Writes `image` into the POSIX shm object of `d`.
void fill_shm(const BufferDescriptor& d, std::span<const std::byte> image) {
    const std::string path = "/" + std::string(shm_name(d));
    ipc::UniqueFd fd(ipc::sys_check(::shm_open(path.c_str(), O_RDWR | O_CLOEXEC, 0), "shm_open"));
    ipc::MappedRegion region = ipc::MappedRegion::map_shared(fd.get(), d.nbytes, true);
    std::memcpy(region.data(), image.data(), image.size());
}

} // namespace

// One load in flight: the answers still awaited and what came back.
struct Supervisor::ModuleLoad {
    std::string name;
    ModuleCallback done;
    std::mutex mu;
    std::size_t remaining = 0;
    std::vector<std::string> chips;
    std::string failures;
};

bool Supervisor::takes_modules(const ChildSlot& slot) const {
    if (slot.spec.kind == ChildKind::CUDA_CHIP) {
        return true;
    }
    return slot.spec.kind == ChildKind::NODE &&
           std::any_of(slot.spec.node->children.begin(), slot.spec.node->children.end(),
                       [](const ChildSpec& c) { return c.kind == ChildKind::CUDA_CHIP; });
}

void Supervisor::load_module_async(const std::string& name, std::vector<std::byte> image, ModuleCallback done) {
    check_image(name, image);
    std::vector<ChildSlot*> targets;
    for (const auto& slot : slots_) {
        std::lock_guard lock(slot->mu);
        if (takes_modules(*slot) && alive(*slot)) {
            targets.push_back(slot.get());
        }
    }
    if (targets.empty()) {
        throw RequestError(ErrorCode::NO_CONSUMER,
                           "module " + name + ": no live cuda chip under " + options_.path + " can load a module");
    }
    const std::string busy = "module " + name + " is being loaded already; try again when that load finished";
    {
        std::lock_guard lock(modules_mu_);
        if (const auto it = modules_.find(name); it != modules_.end() && it->second.loading) {
            bad(busy);
        }
    }
    ModuleRecord record;
    record.info = {name, *detect_module_format(image), image.size(), {}};
    record.loading = true;
    record.image = stage_module_image(name, image);
    TaskArgs args;
    args.tensors.push_back(
        {make_tensor(record.image, DataType::UINT8, {static_cast<std::uint32_t>(image.size())}), TensorTag::INPUT});
    record.frame = encode_task_args(args);
    const std::vector<std::byte> frame = record.frame;
    bool raced = false;
    {
        std::lock_guard lock(modules_mu_);
        const auto it = modules_.find(name);
        if (it == modules_.end()) {
            modules_.emplace(name, std::move(record));
        } else if (it->second.loading) {
            raced = true; // another load of NAME started while this one staged its image
        } else {
            record.usable = it->second.usable;
            record.replaced = it->second.image;
            it->second = std::move(record);
        }
    }
    if (raced) {
        release_module_buffer(record.image);
        bad(busy);
    }
    auto load = std::make_shared<ModuleLoad>();
    load->name = name;
    load->done = std::move(done);
    load->remaining = targets.size();
    const std::string kernel = std::string(MODULE_LOAD_FRAME) + name;
    for (ChildSlot* slot : targets) {
        const bool node = slot->spec.kind == ChildKind::NODE;
        auto answer = [this, load, node, path = slot->path](TaskResult r) {
            bool last = false;
            {
                std::lock_guard lock(load->mu);
                if (!r.ok()) {
                    load->failures += (load->failures.empty() ? "" : "; ") + path + ": " + r.message;
                } else if (!node) {
                    load->chips.push_back(path);
                } else {
                    for (std::size_t at = 0; at < r.message.size();) { // a node answers with its chips' paths
                        const auto end = std::min(r.message.find(' ', at), r.message.size());
                        if (end > at) {
                            load->chips.push_back(r.message.substr(at, end - at));
                        }
                        at = end + 1;
                    }
                }
                last = --load->remaining == 0;
            }
            if (last) {
                finish_module_load(load);
            }
        };
        enqueue(*slot, PendingTask{next_task_id_++, kernel, "", {}, frame, std::move(answer)});
    }
}

// A read-only POSIX shm buffer of the registry holding `image` (journaled, so a crash leaves nothing behind).
BufferDescriptor Supervisor::stage_module_image(const std::string& name, std::span<const std::byte> image) {
    BufferDescriptor d{};
    try {
        d = buffers_.create_posix_shm(image.size(), Access::READ, options_.path);
        fill_shm(d, image);
        return d;
    } catch (const std::exception& e) {
        if (d.nbytes != 0) {
            (void)buffers_.release(d.identity);
        }
        bad("module " + name + ": cannot stage the image in shared memory: " + e.what());
    }
}

void Supervisor::finish_module_load(const std::shared_ptr<ModuleLoad>& load) {
    std::optional<BufferDescriptor> image;
    std::optional<BufferDescriptor> replaced;
    ModuleLoadResult result;
    {
        std::lock_guard lock(modules_mu_);
        ModuleRecord& record = modules_.at(load->name);
        replaced = std::exchange(record.replaced, std::nullopt);
        if (load->failures.empty()) {
            std::sort(load->chips.begin(), load->chips.end());
            record.loading = false;
            record.usable = true;
            record.info.chips = load->chips;
            result.module = record.info;
        } else {
            image = record.image;
            modules_.erase(load->name);
            result.code = ErrorCode::KERNEL_FAILED;
            result.message = "module " + load->name + " did not load: " + load->failures;
        }
    }
    if (image) {
        broadcast_module_frame(std::string(MODULE_UNLOAD_FRAME) + load->name, encode_task_args({}));
        release_module_buffer(*image);
    }
    if (replaced) {
        release_module_buffer(*replaced);
    }
    load->done(std::move(result));
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

bool Supervisor::unload_module(const std::string& name) {
    std::optional<BufferDescriptor> image;
    std::optional<BufferDescriptor> replaced;
    {
        std::lock_guard lock(modules_mu_);
        const auto it = modules_.find(name);
        if (it == modules_.end() || it->second.loading) {
            return false;
        }
        image = it->second.image;
        replaced = it->second.replaced;
        modules_.erase(it);
    }
    broadcast_module_frame(std::string(MODULE_UNLOAD_FRAME) + name, encode_task_args({}));
    release_module_buffer(*image);
    if (replaced) {
        release_module_buffer(*replaced);
    }
    return true;
}

std::vector<ModuleInfo> Supervisor::modules() const {
    std::lock_guard lock(modules_mu_);
    std::vector<ModuleInfo> out;
    for (const auto& [name, record] : modules_) {
        if (record.usable) {
            out.push_back(record.info);
        }
    }
    return out;
}

std::optional<std::string> Supervisor::module_of_buffer(const CanonicalIdentity& id) const {
    std::lock_guard lock(modules_mu_);
    for (const auto& [name, record] : modules_) {
        if (record.image.identity == id || (record.replaced && record.replaced->identity == id)) {
            return name;
        }
    }
    return std::nullopt;
}

// A restarted cuda chip or nested supervisor gets every module again, in name order, before anything queued.
void Supervisor::queue_module_replays_locked(ChildSlot& slot) {
    if (!takes_modules(slot)) {
        return;
    }
    std::vector<PendingTask> replays;
    {
        std::lock_guard lock(modules_mu_);
        for (const auto& [name, record] : modules_) {
            replays.push_back(
                PendingTask{next_task_id_++, std::string(MODULE_LOAD_FRAME) + name, "", {}, record.frame, {}});
        }
    }
    slot.pending.insert(slot.pending.begin(), std::make_move_iterator(replays.begin()),
                        std::make_move_iterator(replays.end()));
}

void Supervisor::broadcast_module_frame(const std::string& kernel, const std::vector<std::byte>& blob) {
    for (auto& slot : slots_) {
        std::lock_guard lock(slot->mu);
        if (!takes_modules(*slot) || !alive(*slot)) {
            continue;
        }
        slot->pending.push_back(PendingTask{next_task_id_++, kernel, "", {}, blob, {}});
        fill_locked(*slot);
    }
}

void Supervisor::release_module_buffer(const BufferDescriptor& d) {
    try {
        (void)buffers_.release(d.identity);
    } catch (const std::exception&) {
        return; // already released (stop() releases everything)
    }
    broadcast_release(d.identity);
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
    const std::string name(module_of(request.kernel));
    std::lock_guard lock(modules_mu_);
    const auto it = modules_.find(name);
    if (it == modules_.end() || !it->second.usable) {
        throw RequestError(ErrorCode::UNKNOWN_KERNEL,
                           "no module " + name + " is loaded (canopy module load " + name + " FILE)");
    }
}

} // namespace canopy::daemon
