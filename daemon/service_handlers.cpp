#include "daemon/service.h"
#include "ipc/mapped_region.h"
#include "ipc/sys_error.h"
#include "worker/worker_loop.h"

#include <atomic>
#include <boost/asio/post.hpp>
#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace canopy::daemon {
namespace {

using nlohmann::json;

constexpr std::uint64_t MAX_READ_CHUNK = 512 * 1024;
// Shm buffers from this size up are created off the io thread, like device buffers.
constexpr std::uint64_t SLOW_CREATE_BYTES = 64 * 1024 * 1024;

[[noreturn]] void bad(const std::string& message) {
    throw RequestError(ErrorCode::BAD_REQUEST, message);
}

// RFC 4648 base64 with padding.
constexpr char B64[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";

std::string base64_encode(const std::byte* data, std::size_t n) {
    std::string out;
    out.reserve((n + 2) / 3 * 4);
    for (std::size_t i = 0; i < n; i += 3) {
        const std::uint32_t b0 = std::to_integer<std::uint32_t>(data[i]);
        const std::uint32_t b1 = i + 1 < n ? std::to_integer<std::uint32_t>(data[i + 1]) : 0;
        const std::uint32_t b2 = i + 2 < n ? std::to_integer<std::uint32_t>(data[i + 2]) : 0;
        const std::uint32_t v = (b0 << 16) | (b1 << 8) | b2;
        out.push_back(B64[(v >> 18) & 63]);
        out.push_back(B64[(v >> 12) & 63]);
        out.push_back(i + 1 < n ? B64[(v >> 6) & 63] : '=');
        out.push_back(i + 2 < n ? B64[v & 63] : '=');
    }
    return out;
}

std::vector<std::byte> base64_decode(const std::string& text) {
    if (text.size() % 4 != 0) {
        bad("data: base64 length " + std::to_string(text.size()) + " is not a multiple of 4");
    }
    std::vector<std::byte> out;
    out.reserve(text.size() / 4 * 3);
    for (std::size_t i = 0; i < text.size(); i += 4) {
        std::uint32_t v = 0;
        int pad = 0;
        for (std::size_t k = 0; k < 4; ++k) {
            const char c = text[i + k];
            const char* p = c == '=' ? nullptr : std::strchr(B64, c);
            if (c == '=' && i + 4 == text.size() && k >= 2) {
                ++pad;
                v <<= 6;
                continue;
            }
            if (p == nullptr || c == '\0' || pad > 0) {
                bad("data: invalid base64 at offset " + std::to_string(i + k));
            }
            v = (v << 6) | static_cast<std::uint32_t>(p - B64);
        }
        out.push_back(static_cast<std::byte>(v >> 16));
        if (pad < 2) {
            out.push_back(static_cast<std::byte>((v >> 8) & 0xff));
        }
        if (pad < 1) {
            out.push_back(static_cast<std::byte>(v & 0xff));
        }
    }
    return out;
}

// A host view of a buffer's bytes in this process: shm mapped by name, a memfd mapped from the
// registry, or the supervisor's own mapping of a preloaded arena.
struct HostView {
    ipc::MappedRegion region;
    std::byte* base = nullptr;
};

HostView map_for_transfer(const BufferInfo& info, const BufferRegistry& registry, bool write) {
    const BufferDescriptor& d = info.descriptor;
    HostView view;
    switch (Backend{d.backend}) {
    case Backend::POSIX_SHM: {
        const std::string path = "/" + std::string(shm_name(d));
        ipc::UniqueFd fd(ipc::sys_check(::shm_open(path.c_str(), O_RDWR | O_CLOEXEC, 0), "shm_open"));
        view.region = ipc::MappedRegion::map_shared(fd.get(), d.nbytes, true);
        view.base = view.region.data();
        return view;
    }
    case Backend::SIM_VMM: {
        auto fds = registry.dup_fds(d.identity);
        if (fds.empty()) {
            throw RequestError(ErrorCode::UNKNOWN_BUFFER, "buffer " + to_string(d.identity) + " has no backing");
        }
        view.region = ipc::MappedRegion::map_shared(fds[0].get(), d.nbytes, true);
        view.base = view.region.data();
        return view;
    }
    case Backend::FORK_SHM:
    case Backend::FORK_COW:
        if (write && Backend{d.backend} == Backend::FORK_COW) {
            throw RequestError(ErrorCode::ACCESS_DENIED, "preloaded arena '" + info.name + "' is read-only");
        }
        view.base = reinterpret_cast<std::byte*>(fork_base(d));
        return view;
    case Backend::CUDA_VMM:
        break;
    }
    throw std::logic_error("cuda_vmm buffers are read and written through a staging buffer");
}

// The chip that copies between a CUDA_VMM buffer and a staging buffer: its creator, or rank 0 of a symmetric
// buffer (whose copy `buffer read` and `buffer write` address).
std::string transfer_chip(const BufferInfo& info) {
    return info.world.empty() ? info.creator : info.world.front();
}

// The error reply for the exception being handled; call it only inside a catch block. A RequestError or
// WireError keeps its code; anything else is BAD_REQUEST.
json error_of_current_exception() {
    try {
        throw;
    } catch (const RequestError& e) {
        return error_reply(error_code_name(e.code()), e.what());
    } catch (const WireError& e) {
        return error_reply(error_code_name(e.code()), e.what());
    } catch (const std::exception& e) {
        return error_reply("BAD_REQUEST", e.what());
    } catch (...) {
        return error_reply("BAD_REQUEST", "an unknown error");
    }
}

} // namespace

void Service::handle(const json& request, const Peer& peer, Reply reply) {
    try {
        const std::string op = string_member(request, "op", "request");
        if (op == "submit" || op == "run") {
            handle_run(request, reply, op == "submit", peer); // a copy: `reply` still answers a throw
            return;
        }
        if (op == "wait") {
            handle_wait(request, reply);
            return;
        }
        json result = json::object();
        if (op == "status") {
            result = handle_status();
        } else if (op == "cancel") {
            result = handle_cancel(request, peer);
        } else if (op == "buffer.create") {
            const std::string backend = request.contains("backend") && request["backend"].is_string()
                                            ? request["backend"].get<std::string>()
                                            : "";
            const bool large = request.contains("bytes") && request["bytes"].is_number_unsigned() &&
                               request["bytes"].get<std::uint64_t>() >= SLOW_CREATE_BYTES;
            if (backend == "vmm" || backend == "symmetric" || large) {
                // The chips of the buffer make it, after the tasks queued on them, and reserving a large shm
                // object takes a while (about 1 s per GiB): answered from slow_.
                boost::asio::post(slow_, [this, request, reply, peer] {
                    try {
                        reply(handle_buffer_create(request, peer));
                    } catch (...) {
                        reply(error_of_current_exception());
                    }
                });
                return;
            }
            result = handle_buffer_create(request, peer);
        } else if (op == "buffer.list") {
            json list = json::array();
            for (const auto& b : supervisor_.buffers()) {
                list.push_back(buffer_entry(b));
            }
            result = {{"buffers", list}};
        } else if (op == "buffer.show") {
            result = {{"buffer", buffer_entry(live_buffer(request))}};
        } else if (op == "buffer.release") {
            const CanonicalIdentity id = live_buffer(request).descriptor.identity;
            if (const auto module = supervisor_.module_of_buffer(id)) {
                bad("buffer " + string_member(request, "buffer", "request") + " holds the image of module " + *module +
                    "; it is released when the module is replaced or the daemon stops");
            }
            access_.require_owner(peer, id, "buffer.release", "release");
            const auto warning = supervisor_.release_buffer(id);
            access_.forget(id);
            if (warning) {
                result["warning"] = *warning;
            }
        } else if (op == "buffer.write" || op == "buffer.read") {
            handle_buffer_transfer(request, reply, op == "buffer.write", peer);
            return;
        } else if (op == "buffer.fd") {
            handle_buffer_fd(request, reply, peer);
            return;
        } else if (op == "tasks") {
            std::lock_guard lock(mu_);
            result = {{"tasks", book_.list()}};
        } else if (op == "metrics") {
            result = {{"text", render_metrics()}};
        } else if (op == "module.load") {
            access_.require_admin(peer, "module.load");
            log_->info("module load asked by uid {} pid {}", peer.uid, peer.pid);
            handle_module_load(request, reply); // answered when every cuda chip loaded it
            return;
        } else if (op == "module.list") {
            json list = json::array();
            for (const auto& m : supervisor_.modules()) {
                list.push_back(module_json(m));
            }
            result = {{"modules", list}};
        } else if (op == "worker.restart") {
            const std::string worker = string_member(request, "worker", "request");
            access_.require_admin(peer, "worker.restart");
            supervisor_.restart_worker(worker);
            log_->warn("worker {}: restart asked by uid {} pid {}", worker, peer.uid, peer.pid);
            result = {{"worker", worker}};
        } else if (op == "shutdown") {
            access_.require_admin(peer, "shutdown");
            log_->warn("shutdown asked by uid {} pid {}", peer.uid, peer.pid);
            reply(json::object());
            request_stop();
            return;
        } else {
            bad("unknown op \"" + op + "\"");
        }
        reply(std::move(result));
    } catch (...) {
        json error = error_of_current_exception();
        const std::string code = error["error"]["code"];
        if (code == "UNAUTHORIZED" || code == "ACCESS_DENIED") {
            log_->warn("control: refused {} of uid {} pid {}: {}", request.value("op", "?"), peer.uid, peer.pid,
                       error["error"]["message"].get<std::string>());
        }
        reply(std::move(error));
    }
}

json Service::handle_status() const {
    json workers = json::array();
    for (const auto& w : supervisor_.status()) {
        workers.push_back(worker_json(w));
    }
    const double uptime = std::chrono::duration<double>(std::chrono::steady_clock::now() - started_).count();
    return {{"node", {{"name", config_.node.name}, {"level", config_.node.level}}},
            {"pid", ::getpid()},
            {"uptime_s", uptime},
            {"workers", workers}};
}

BufferDescriptor Service::resolve_buffer(const std::string& id, const std::string& where) const {
    BufferRegistry& registry = const_cast<Supervisor&>(supervisor_).registry();
    CanonicalIdentity identity{};
    try {
        identity = parse_identity(id);
    } catch (const WireError&) {
        if (auto arena = registry.find_arena(id)) {
            return arena->descriptor;
        }
        throw RequestError(ErrorCode::UNKNOWN_BUFFER,
                           where + ": no buffer '" + id + "' (not a buffer ID nor a preloaded arena's name)");
    }
    switch (registry.lookup(identity)) {
    case BufferLookup::LIVE:
        return registry.find(identity)->descriptor;
    case BufferLookup::STALE:
        throw RequestError(ErrorCode::STALE_BUFFER, where + ": buffer " + id + " was released");
    case BufferLookup::UNKNOWN:
        break;
    }
    throw RequestError(ErrorCode::UNKNOWN_BUFFER, where + ": no buffer " + id);
}

BufferInfo Service::live_buffer(const json& request) const {
    const auto d = resolve_buffer(string_member(request, "buffer", "request"), "buffer");
    return *const_cast<Supervisor&>(supervisor_).registry().find(d.identity);
}

Backend Service::device_backend(const std::string& chip) const {
    // The device memory of a chip: CUDA_VMM on a cuda chip, its sim stand-in on a sim chip. A path that names
    // no chip is refused by create_buffer.
    for (const auto& w : supervisor_.status()) {
        if ((w.path == chip || w.path == "/" + chip) && w.backend == "cuda") {
            return Backend::CUDA_VMM;
        }
    }
    return Backend::SIM_VMM;
}

json Service::buffer_entry(const BufferInfo& info) const {
    json entry = buffer_json(info);
    const auto owner = access_.owner(info.descriptor.identity);
    entry["owner_uid"] = owner ? json(*owner) : json();
    return entry;
}

json Service::handle_buffer_create(const json& request, const Peer& peer) {
    BufferRequest r;
    r.nbytes = uint_member(request, "bytes", "request");
    r.access =
        request.contains("access") ? parse_access(string_member(request, "access", "request")) : Access::READWRITE;
    r.on = request.contains("on") ? string_member(request, "on", "request") : "";
    const std::string backend = request.contains("backend") ? string_member(request, "backend", "request") : "shm";
    if (backend == "shm") {
        r.backend = Backend::POSIX_SHM;
    } else if (backend == "vmm") {
        if (r.on.empty()) {
            bad("a vmm buffer needs --on CHIP");
        }
        r.backend = device_backend(r.on);
    } else if (backend == "symmetric") {
        const json& world = member(request, "world", "request");
        if (!world.is_array() || world.empty()) {
            bad("world: expected a non-empty array of chip paths");
        }
        for (const auto& chip : world) {
            if (!chip.is_string()) {
                bad("world: expected chip paths");
            }
            r.world.push_back(chip.get<std::string>());
        }
        r.backend = device_backend(r.world.front());
    } else {
        bad("backend: expected \"shm\", \"vmm\" or \"symmetric\", got \"" + backend + "\"");
    }
    const BufferDescriptor d = supervisor_.create_buffer(r);
    access_.set_owner(d.identity, peer.uid);
    log_->debug("created buffer {} ({} bytes, {}) for uid {}", to_string(d.identity), d.nbytes,
                to_string(Backend{d.backend}), peer.uid);
    return {{"buffer", buffer_entry(*supervisor_.registry().find(d.identity))}};
}

void Service::handle_buffer_transfer(const json& request, const Reply& reply, bool write, const Peer& peer) {
    const BufferInfo info = live_buffer(request);
    access_.require_owner(peer, info.descriptor.identity, write ? "buffer.write" : "buffer.read",
                          write ? "write the bytes of" : "read the bytes of");
    const std::uint64_t nbytes = info.descriptor.nbytes;
    const std::uint64_t offset = uint_member(request, "offset", "request", 0);
    if (offset > nbytes) {
        bad("offset " + std::to_string(offset) + " is past the end of the " + std::to_string(nbytes) + "-byte buffer");
    }
    std::vector<std::byte> data;
    std::uint64_t want = 0;
    if (write) {
        data = base64_decode(string_member(request, "data", "request"));
        if (data.size() > nbytes - offset) {
            bad("writing " + std::to_string(data.size()) + " bytes at offset " + std::to_string(offset) +
                " runs past the end of the " + std::to_string(nbytes) + "-byte buffer");
        }
    } else {
        want = uint_member(request, "bytes", "request", std::min(nbytes - offset, MAX_READ_CHUNK));
        if (want > MAX_READ_CHUNK) {
            bad("bytes: at most " + std::to_string(MAX_READ_CHUNK) + " per request");
        }
        if (want > nbytes - offset) {
            bad("reading " + std::to_string(want) + " bytes at offset " + std::to_string(offset) +
                " runs past the end of the " + std::to_string(nbytes) + "-byte buffer");
        }
    }
    const std::uint64_t length = write ? data.size() : want;
    if (length == 0) {
        reply(write ? json{{"written", 0}} : json{{"data", ""}, {"rest", nbytes - offset}});
        return;
    }
    // The transfer is a task of the scheduler over the bytes it touches: it waits for earlier tasks that
    // write them (or, for a write, read them), and later tasks wait for it.
    const Tensor range =
        make_tensor(info.descriptor, DataType::UINT8, {static_cast<std::uint32_t>(length)}, {}, offset);
    schedule_step(
        write ? "buffer.write" : "buffer.read",
        std::vector<TensorArg>{{range, write ? TensorTag::OUTPUT : TensorTag::INPUT}}, reply,
        std::string(write ? "buffer write" : "buffer read") + ": the daemon stopped before the transfer ran",
        [this, info, offset, data = std::move(data), length, write](std::uint64_t id, const Reply& once) mutable {
            run_transfer(info, offset, std::move(data), length, write, id, once);
        });
}

void Service::schedule_step(const std::string& name, std::vector<TensorArg> footprint, const Reply& reply,
                            std::string stopped, std::function<void(std::uint64_t id, const Reply& once)> step) {
    ReadyWork to_dispatch;
    {
        std::lock_guard lock(mu_);
        if (stopping_) {
            throw RequestError(ErrorCode::WORKER_DIED, "the daemon is stopping");
        }
        TaskRecord record;
        record.id = next_task_++;
        record.name = name;
        record.kernel = record.name;
        record.listed = false;
        record.submitted_ns = worker::monotonic_ns();
        const std::uint64_t id = record.id;
        // One reply, whichever comes first: the step's own, or the daemon stopping before it ran.
        auto replied = std::make_shared<std::atomic<bool>>(false);
        const Reply once = [replied, reply](Response answer) {
            if (!replied->exchange(true)) {
                reply(std::move(answer));
            }
        };
        record.local = [step = std::move(step), id, once]() mutable { step(id, once); };
        record.on_finish.push_back(
            [once, stopped = std::move(stopped)](const std::string&) { once(error_reply("WORKER_DIED", stopped)); });
        TaskRecord& stored = book_.add(std::move(record));
        scheduler_.add(id, stored.name, std::move(footprint));
        dispatch_ready_locked(to_dispatch);
    }
    dispatch(std::move(to_dispatch));
}

void Service::run_transfer(const BufferInfo& info, std::uint64_t offset, std::vector<std::byte> data,
                           std::uint64_t length, bool write, std::uint64_t id, const Reply& reply) {
    const std::uint64_t start = worker::monotonic_ns();
    // The reply goes first, so that the task's on_finish (which answers only a transfer that never ran) finds it
    // answered. A request that arrives in between still orders after the transfer, which is not complete yet.
    auto finish = [this, id, start, reply](ErrorCode code, const std::string& message, json answer) {
        reply(std::move(answer));
        on_result(id, TaskResult{id, code, message, start, worker::monotonic_ns()});
    };
    try {
        if (Backend{info.descriptor.backend} == Backend::CUDA_VMM) {
            transfer_through_chip(info, offset, std::move(data), length, write, finish);
            return;
        }
        HostView view = map_for_transfer(info, supervisor_.registry(), write);
        if (write) {
            std::memcpy(view.base + offset, data.data(), data.size());
            finish(ErrorCode::OK, {}, json{{"written", data.size()}});
        } else {
            finish(ErrorCode::OK, {},
                   json{{"data", base64_encode(view.base + offset, length)},
                        {"rest", info.descriptor.nbytes - offset - length}});
        }
    } catch (const RequestError& e) {
        finish(e.code(), e.what(), error_reply(error_code_name(e.code()), e.what()));
    } catch (const std::exception& e) {
        finish(ErrorCode::BAD_REQUEST, e.what(), error_reply("BAD_REQUEST", e.what()));
    }
}

void Service::transfer_through_chip(const BufferInfo& info, std::uint64_t offset, std::vector<std::byte> data,
                                    std::uint64_t length, bool write, const TransferDone& done) {
    // Device memory is reached only by its chip: bytes travel through a POSIX shm staging buffer, copied by the
    // chip's `copy` as uint8 views. The staging buffer is released once the copy finished.
    BufferRequest staging_request;
    staging_request.nbytes = length;
    const BufferDescriptor staging = supervisor_.create_buffer(staging_request);
    try {
        const auto count = static_cast<std::uint32_t>(length); // at most a control frame's worth of bytes
        TaskRequest copy;
        copy.kernel = "copy";
        copy.worker = transfer_chip(info);
        const Tensor staged = make_tensor(staging, DataType::UINT8, {count});
        const Tensor on_device = make_tensor(info.descriptor, DataType::UINT8, {count}, {}, offset);
        copy.args.tensors.push_back({write ? staged : on_device, TensorTag::INPUT});
        copy.args.tensors.push_back({write ? on_device : staged, TensorTag::OUTPUT});
        copy.timeout = config_.supervision.task_timeout;
        if (write) {
            HostView view =
                map_for_transfer(*supervisor_.registry().find(staging.identity), supervisor_.registry(), true);
            std::memcpy(view.base, data.data(), data.size());
        }
        const std::uint64_t rest = info.descriptor.nbytes - offset - length;
        supervisor_.submit(std::move(copy), [this, staging, length, rest, write, done](TaskResult result) {
            ErrorCode code = result.code;
            std::string message = result.message;
            json answer;
            try {
                if (!result.ok()) {
                    message = std::string(write ? "buffer write" : "buffer read") +
                              " through the chip failed: " + result.message;
                } else if (write) {
                    answer = {{"written", length}};
                } else {
                    HostView view =
                        map_for_transfer(*supervisor_.registry().find(staging.identity), supervisor_.registry(), false);
                    answer = {{"data", base64_encode(view.base, length)}, {"rest", rest}};
                }
            } catch (const std::exception& e) {
                code = ErrorCode::BAD_REQUEST;
                message = e.what();
            }
            (void)supervisor_.release_buffer(staging.identity);
            done(code, message,
                 code == ErrorCode::OK ? std::move(answer) : error_reply(error_code_name(code), message));
        });
    } catch (...) {
        (void)supervisor_.release_buffer(staging.identity);
        throw;
    }
}

void Service::handle_module_load(const json& request, const Reply& reply) {
    const std::string name = string_member(request, "name", "request");
    auto image = base64_decode(string_member(request, "data", "request"));
    if (request.contains("format")) {
        // Optional: a client's statement of the format, checked against the bytes (which alone decide).
        const std::string stated = string_member(request, "format", "request");
        if (stated != "ptx" && stated != "cubin" && stated != "fatbin") {
            bad("format: expected \"ptx\", \"cubin\" or \"fatbin\", got \"" + stated + "\"");
        }
        const auto found = detect_module_format(image);
        if (found && (stated == "ptx") != (*found == ModuleFormat::PTX)) {
            bad("module " + name + ": format says " + stated + " but the image is " + to_string(*found));
        }
    }
    log_->info("loading module {} ({} bytes)", name, image.size());
    supervisor_.load_module_async(name, std::move(image), [reply, log = log_](ModuleLoadResult r) {
        if (r.code != ErrorCode::OK) {
            log->warn("{}", r.message);
            reply(error_reply(error_code_name(r.code), r.message));
            return;
        }
        reply(json{{"module", module_json(r.module)}});
    });
}

} // namespace canopy::daemon
