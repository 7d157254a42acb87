// User modules (docs/modules.md): the module table, the @module_load frames that carry an image to every child
// that takes modules, the answers gathered per load, and the frames that replay the table into a restarted child.
#include "daemon/module_service.h"

#include "daemon/request_error.h"
#include "ipc/mapped_region.h"
#include "ipc/sys_error.h"
#include "protocol/module_launch.h"
#include "protocol/task_args.h"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <span>
#include <sys/mman.h>

namespace canopy::daemon {
namespace {

void check_image(const std::string& name, std::span<const std::byte> image) {
    if (!is_valid_module_name(name)) {
        bad_request("module name '" + name + "': must match [A-Za-z_][A-Za-z0-9_]{0,39}");
    }
    if (image.empty()) {
        bad_request("module " + name + ": the image is empty");
    }
    if (image.size() > MAX_MODULE_IMAGE_BYTES) {
        bad_request("module " + name + ": the image is " + std::to_string(image.size()) + " bytes, at most " +
                    std::to_string(MAX_MODULE_IMAGE_BYTES) + " (64 MiB)");
    }
    if (!detect_module_format(image)) {
        bad_request("module " + name +
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
struct ModuleService::Load {
    std::string name;
    ModuleCallback done;
    std::mutex mu;
    std::size_t remaining = 0;
    std::vector<std::string> chips;
    std::string failures;
};

ModuleService::ModuleService(BufferRegistry& buffers, std::string owner, Host host)
    : buffers_(buffers), owner_(std::move(owner)), host_(std::move(host)) {}

bool ModuleService::takes_modules(const ChildSpec& spec) {
    if (spec.kind == ChildKind::CUDA_CHIP || spec.kind == ChildKind::REMOTE) {
        return true; // a remote node answers with the cuda chips it has, which may be none
    }
    return spec.kind == ChildKind::NODE &&
           std::any_of(spec.node->children.begin(), spec.node->children.end(),
                       [](const ChildSpec& c) { return c.kind == ChildKind::CUDA_CHIP; });
}

void ModuleService::load_async(const std::string& name, std::vector<std::byte> image, ModuleCallback done) {
    check_image(name, image);
    const std::vector<ChildSlot*> targets = host_.targets();
    if (targets.empty()) {
        throw RequestError(ErrorCode::NO_CONSUMER,
                           "module " + name + ": no live cuda chip under " + owner_ + " can load a module");
    }
    const std::string busy = "module " + name + " is being loaded already; try again when that load finished";
    {
        std::lock_guard lock(mu_);
        if (const auto it = records_.find(name); it != records_.end() && it->second.loading) {
            bad_request(busy);
        }
    }
    Record record;
    record.info = {name, *detect_module_format(image), image.size(), {}};
    record.loading = true;
    record.image = stage(name, image);
    TaskArgs args;
    args.tensors.push_back(
        {make_tensor(record.image, DataType::UINT8, {static_cast<std::uint32_t>(image.size())}), TensorTag::INPUT});
    record.frame = encode_task_args(args);
    const std::vector<std::byte> frame = record.frame;
    bool raced = false;
    {
        std::lock_guard lock(mu_);
        const auto it = records_.find(name);
        if (it == records_.end()) {
            records_.emplace(name, std::move(record));
        } else if (it->second.loading) {
            raced = true; // another load of NAME started while this one staged its image
        } else {
            record.usable = it->second.usable;
            record.replaced = it->second.image;
            it->second = std::move(record);
        }
    }
    if (raced) {
        release_image(record.image);
        bad_request(busy);
    }
    auto load = std::make_shared<Load>();
    load->name = name;
    load->done = std::move(done);
    load->remaining = targets.size();
    const std::string kernel = std::string(MODULE_LOAD_FRAME) + name;
    for (ChildSlot* slot : targets) {
        const bool node = slot->spec.kind == ChildKind::NODE || slot->spec.kind == ChildKind::REMOTE;
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
                finish(load);
            }
        };
        host_.send(*slot, ModuleFrame{kernel, frame}, std::move(answer));
    }
}

// A read-only POSIX shm buffer of the registry holding `image` (journaled, so a crash leaves nothing behind).
BufferDescriptor ModuleService::stage(const std::string& name, std::span<const std::byte> image) {
    BufferDescriptor d{};
    try {
        d = buffers_.create_posix_shm(image.size(), Access::READ, owner_);
        fill_shm(d, image);
        return d;
    } catch (const std::exception& e) {
        if (d.nbytes != 0) {
            (void)buffers_.release(d.identity);
        }
        bad_request("module " + name + ": cannot stage the image in shared memory: " + e.what());
    }
}

void ModuleService::finish(const std::shared_ptr<Load>& load) {
    std::optional<BufferDescriptor> image;
    std::optional<BufferDescriptor> replaced;
    ModuleLoadResult result;
    {
        std::lock_guard lock(mu_);
        Record& record = records_.at(load->name);
        replaced = std::exchange(record.replaced, std::nullopt);
        if (load->failures.empty() && load->chips.empty()) {
            // Every target answered, and none had a cuda chip to load it into (remote nodes without one).
            image = record.image;
            records_.erase(load->name);
            result.code = ErrorCode::NO_CONSUMER;
            result.message = "module " + load->name + ": no live cuda chip under " + owner_ + " can load a module";
        } else if (load->failures.empty()) {
            std::sort(load->chips.begin(), load->chips.end());
            record.loading = false;
            record.usable = true;
            record.info.chips = load->chips;
            result.module = record.info;
        } else {
            image = record.image;
            records_.erase(load->name);
            result.code = ErrorCode::KERNEL_FAILED;
            result.message = "module " + load->name + " did not load: " + load->failures;
        }
    }
    if (image) {
        broadcast({std::string(MODULE_UNLOAD_FRAME) + load->name, encode_task_args({})});
        release_image(*image);
    }
    if (replaced) {
        release_image(*replaced);
    }
    load->done(std::move(result));
}

bool ModuleService::unload(const std::string& name) {
    std::optional<BufferDescriptor> image;
    std::optional<BufferDescriptor> replaced;
    {
        std::lock_guard lock(mu_);
        const auto it = records_.find(name);
        if (it == records_.end() || it->second.loading) {
            return false;
        }
        image = it->second.image;
        replaced = it->second.replaced;
        records_.erase(it);
    }
    broadcast({std::string(MODULE_UNLOAD_FRAME) + name, encode_task_args({})});
    release_image(*image);
    if (replaced) {
        release_image(*replaced);
    }
    return true;
}

std::vector<ModuleInfo> ModuleService::list() const {
    std::lock_guard lock(mu_);
    std::vector<ModuleInfo> out;
    for (const auto& [name, record] : records_) {
        if (record.usable) {
            out.push_back(record.info);
        }
    }
    return out;
}

std::optional<std::string> ModuleService::module_of_buffer(const CanonicalIdentity& id) const {
    std::lock_guard lock(mu_);
    for (const auto& [name, record] : records_) {
        if (record.image.identity == id || (record.replaced && record.replaced->identity == id)) {
            return name;
        }
    }
    return std::nullopt;
}

std::vector<ModuleFrame> ModuleService::replay_frames() const {
    std::lock_guard lock(mu_);
    std::vector<ModuleFrame> frames;
    for (const auto& [name, record] : records_) {
        frames.push_back({std::string(MODULE_LOAD_FRAME) + name, record.frame});
    }
    return frames;
}

void ModuleService::broadcast(const ModuleFrame& frame) {
    for (ChildSlot* child : host_.targets()) {
        host_.send(*child, frame, {});
    }
}

void ModuleService::release_image(const BufferDescriptor& d) {
    try {
        (void)buffers_.release(d.identity);
    } catch (const std::exception&) {
        return; // already released (the supervisor's stop releases everything)
    }
    host_.release_everywhere(d.identity);
}

void ModuleService::require_usable(const std::string& name) const {
    std::lock_guard lock(mu_);
    const auto it = records_.find(name);
    if (it == records_.end() || !it->second.usable) {
        throw RequestError(ErrorCode::UNKNOWN_KERNEL,
                           "no module " + name + " is loaded (canopy module load " + name + " FILE)");
    }
}

} // namespace canopy::daemon
