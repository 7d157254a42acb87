// buffer.fd: a buffer's file descriptors handed to a client over the control socket (SCM_RIGHTS), so that it
// maps the bytes itself and nothing is copied through the daemon (docs/control-protocol.md, "Buffers by file
// descriptor"). The hand-over is a step of the scheduler over the whole buffer, like a transfer: the reply
// comes once every earlier task that writes the buffer (and, for a writable fd, that reads it) has finished,
// so the client sees their results; tasks submitted after the reply see what the client wrote before it
// submitted them.
#include "daemon/host_window.h"
#include "daemon/json_codec.h"
#include "daemon/request_error.h"
#include "daemon/service.h"
#include "ipc/fd_passing.h"
#include "ipc/sys_error.h"
#include "worker/worker_loop.h"

#include <fcntl.h>
#include <sys/mman.h>

namespace canopy::daemon {
namespace {

// The fds of `info`'s backing, read-only when `writable` is false (REQUIRES: not a preloaded arena, and writable for
// cuda_vmm). Throws ipc::SysError.
std::vector<ipc::UniqueFd> backing_fds(const BufferInfo& info, const BufferRegistry& registry, bool writable) {
    const BufferDescriptor& d = info.descriptor;
    std::vector<ipc::UniqueFd> fds;
    switch (Backend{d.backend}) {
    case Backend::POSIX_SHM: {
        const std::string path = "/" + std::string(shm_name(d));
        fds.emplace_back(
            ipc::sys_check(::shm_open(path.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0), "shm_open"));
        return fds;
    }
    case Backend::SIM_VMM:
        for (const ipc::UniqueFd& fd : registry.dup_fds(d.identity)) {
            // A new open of the memfd has the access asked for: a read-only one cannot be mapped writable.
            const std::string self = "/proc/self/fd/" + std::to_string(fd.get());
            fds.emplace_back(ipc::sys_check(::open(self.c_str(), (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC),
                                            "open(/proc/self/fd)"));
        }
        return fds;
    case Backend::CUDA_VMM:
        return registry.dup_fds(d.identity);
    case Backend::FORK_SHM:
    case Backend::FORK_COW:
        break;
    }
    throw std::logic_error("buffer.fd: a preloaded arena has no file descriptor");
}

} // namespace

void Service::handle_buffer_fd(const nlohmann::json& request, const Reply& reply, const Peer& peer) {
    const BufferInfo info = live_buffer(request);
    require_local_bytes(info, "buffer.fd");
    // The access grant (r, w, rw) bounds what tasks do with the buffer; its owner reads and writes the bytes from
    // the host whatever it is, here as with buffer.read and buffer.write.
    std::string access = "readwrite";
    if (request.contains("access")) {
        access = string_member(request, "access", "request");
        if (access != "read" && access != "readwrite") {
            bad_request("access: expected \"read\" or \"readwrite\", got \"" + access + "\"");
        }
    }
    const bool writable = access == "readwrite";
    access_.require_owner(peer, info.descriptor.identity, "buffer.fd", "map the bytes of");
    switch (Backend{info.descriptor.backend}) {
    case Backend::FORK_SHM:
    case Backend::FORK_COW:
        bad_request("buffer.fd: preloaded arena '" + info.name +
                    "' has no file descriptor; tasks reach it by its name");
    case Backend::CUDA_VMM:
        if (!writable) {
            throw RequestError(ErrorCode::ACCESS_DENIED,
                               "buffer.fd: a cuda_vmm handle maps read-write wherever it is imported, so it is "
                               "handed out only with \"access\": \"readwrite\"");
        }
        break;
    case Backend::POSIX_SHM:
    case Backend::SIM_VMM:
        break;
    }
    // The whole buffer: what the hand-over orders after.
    schedule_step(
        "buffer.fd",
        byte_range_views(info.descriptor, 0, info.descriptor.nbytes, writable ? TensorTag::OUTPUT : TensorTag::INPUT),
        reply, "buffer.fd: the daemon stopped before the hand-over",
        [this, info, writable](std::uint64_t id, const Reply& once) {
            const std::uint64_t start = worker::monotonic_ns();
            ErrorCode code = ErrorCode::OK;
            std::string message;
            try {
                std::vector<ipc::UniqueFd> fds = backing_fds(info, supervisor_.registry(), writable);
                Response answer(nlohmann::json{{"buffer", buffer_entry(info)},
                                               {"bytes", info.descriptor.nbytes},
                                               {"writable", writable},
                                               {"fds", fds.size()}});
                once(std::move(answer.attach(std::move(fds))));
            } catch (const RequestError& e) {
                code = e.code();
                message = e.what();
                once(error_reply(error_code_name(code), message));
            } catch (const std::exception& e) {
                code = ErrorCode::BAD_REQUEST;
                message = std::string("buffer.fd: ") + e.what();
                once(error_reply("BAD_REQUEST", message));
            }
            on_result(id, TaskResult{id, code, message, start, worker::monotonic_ns()});
        });
}

} // namespace canopy::daemon
