#pragma once
// ModuleService: the user modules of one supervisor (docs/modules.md). It checks a module's name and image,
// stages the image in a read-only POSIX shm buffer of the supervisor's registry, has every live child that
// takes modules (cuda chips, and nested supervisors that have one) load it through an @module_load frame,
// gathers their answers, and keeps the table of modules whose load completed, with the frames that load them
// again into a child that restarts. The supervisor owns the children; the service reaches them only through
// its Host.
//
// Lock order: the service's mutex is a leaf; Host calls are made without it held, and replay_frames() may be
// called under a slot's mu.
//
// Thread safety: every method may be called from any thread.

#include "daemon/buffer_registry.h"
#include "daemon/child_slot.h"
#include "daemon/task.h"
#include "protocol/module_image.h"

#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

namespace canopy::daemon {

// A user module loaded into the cuda chips of the tree (docs/modules.md).
struct ModuleInfo {
    std::string name;
    ModuleFormat format = ModuleFormat::PTX;
    std::uint64_t bytes = 0;
    std::vector<std::string> chips; // the cuda chips that loaded it, nested ones included
};

// The outcome of a module load: code OK and the module, or the error.
struct ModuleLoadResult {
    ErrorCode code = ErrorCode::OK;
    std::string message;
    ModuleInfo module;
};
using ModuleCallback = std::function<void(ModuleLoadResult)>;

// A control frame for a child: its kernel (@module_load:NAME, @module_unload:NAME) and blob.
struct ModuleFrame {
    std::string kernel;
    std::vector<std::byte> blob;
};

class ModuleService {
public:
    struct Host {
        // The live children that take modules.
        std::function<std::vector<ChildSlot*>()> targets;
        // Queues `frame` for `child`; `done` (may be empty) runs once with the child's answer.
        std::function<void(ChildSlot& child, ModuleFrame frame, TaskCallback done)> send;
        // Tells every live child to drop its mapping of a released buffer.
        std::function<void(const CanonicalIdentity&)> release_everywhere;
    };

    // `owner`: the supervisor's path, for messages and as the owner of the image buffers.
    ModuleService(BufferRegistry& buffers, std::string owner, Host host);

    // Whether a child of `spec` takes modules: a cuda chip, or a nested supervisor with one.
    static bool takes_modules(const ChildSpec& spec);

    // Checks the name and image (BAD_REQUEST: bad name, empty, over MAX_MODULE_IMAGE_BYTES, neither PTX nor a
    // cubin/fatbin; a second load of a NAME still loading) and that a target exists (NO_CONSUMER), throwing
    // RequestError; then stages the image and sends @module_load:NAME to every target. `done` runs once, when
    // all answered: OK with the module, or KERNEL_FAILED naming each child that failed and why, in which case
    // NAME is unloaded everywhere and forgotten. Loading an existing NAME replaces it.
    void load_async(const std::string& name, std::vector<std::byte> image, ModuleCallback done);
    // Unloads NAME everywhere and forgets it; false when it is not recorded (or still loading).
    bool unload(const std::string& name);
    // Every module whose load completed, by name.
    std::vector<ModuleInfo> list() const;
    // The module whose image buffer `id` is, if any.
    std::optional<std::string> module_of_buffer(const CanonicalIdentity& id) const;
    // The frames that load every recorded module, in name order: what a restarted child runs first.
    std::vector<ModuleFrame> replay_frames() const;
    // Throws RequestError(UNKNOWN_KERNEL) unless module `name`'s load completed.
    void require_usable(const std::string& name) const;

private:
    struct Record {
        ModuleInfo info;                          // of the newest image
        BufferDescriptor image{};                 // the shm buffer holding it
        std::vector<std::byte> frame;             // the @module_load blob over `image`
        bool usable = false;                      // a load completed on every chip; tasks may name it
        bool loading = false;                     // a load is in flight
        std::optional<BufferDescriptor> replaced; // the previous image, released when the load finishes
    };
    struct Load;

    BufferDescriptor stage(const std::string& name, std::span<const std::byte> image);
    void finish(const std::shared_ptr<Load>& load);
    void broadcast(const ModuleFrame& frame);
    void release_image(const BufferDescriptor& d);

    BufferRegistry& buffers_;
    std::string owner_;
    Host host_;
    mutable std::mutex mu_; // guards records_
    std::map<std::string, Record> records_;
};

} // namespace canopy::daemon
