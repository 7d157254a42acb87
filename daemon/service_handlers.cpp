#include "daemon/host_window.h"
#include "daemon/request_error.h"
#include "daemon/service.h"
#include "worker/worker_loop.h"

#include <atomic>
#include <boost/asio/post.hpp>
#include <tuple>
#include <unistd.h>

namespace canopy::daemon {
namespace {

using nlohmann::json;

// Shm buffers from this size up are created off the io thread, like device buffers.
constexpr std::uint64_t SLOW_CREATE_BYTES = 64 * 1024 * 1024;

// The error reply for the exception being handled; call it only inside a catch block (current_error).
json error_of_current_exception() {
    const auto [code, message] = current_error();
    return error_reply(error_code_name(code), message);
}

} // namespace

void Service::handle(const json& request, RawRun* run, const Peer& peer, Reply reply, const Attachment& attachment) {
    try {
        const std::string op = string_member(request, "op", "request");
        if (request.contains("attachment") && op != "buffer.write" && op != "buffer.read") {
            bad_request("attachment: op \"" + op +
                        "\" takes no attachment (only buffer.write does, and buffer.read asks "
                        "for one)");
        }
        if (op == "submit" || op == "run") {
            handle_run(request, run, reply, op == "submit", peer); // a copy: `reply` still answers a throw
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
            const bool placed = request.contains("on");
            if (backend == "vmm" || backend == "symmetric" || large || placed) {
                // The chips of the buffer make it, after the tasks queued on them, reserving a large shm object
                // takes a while (about 1 s per GiB), and a buffer on a remote node's host takes a round trip
                // there: answered from slow_.
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
            handle_buffer_release(request, reply, peer);
            return;
        } else if (op == "buffer.write" || op == "buffer.read") {
            handle_buffer_transfer(request, reply, op == "buffer.write", peer, attachment);
            return;
        } else if (op == "buffer.fd") {
            handle_buffer_fd(request, reply, peer);
            return;
        } else if (op == "tasks") {
            std::string members;
            {
                std::lock_guard lock(mu_);
                members = book_.list_members();
            }
            reply(Response::members(std::move(members)));
            return;
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
            bad_request("unknown op \"" + op + "\"");
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
    BufferDescriptor descriptor{};
    switch (registry.inspect(identity, [&](const BufferInfo& info) { descriptor = info.descriptor; })) {
    case BufferLookup::LIVE:
        return descriptor;
    case BufferLookup::STALE:
        if (const auto why = registry.stale_reason(identity)) {
            throw RequestError(ErrorCode::STALE_BUFFER, where + ": " + *why);
        }
        throw RequestError(ErrorCode::STALE_BUFFER, where + ": buffer " + id + " was released");
    case BufferLookup::UNKNOWN:
        break;
    }
    throw RequestError(ErrorCode::UNKNOWN_BUFFER, where + ": no buffer " + id);
}

void Service::require_local_bytes(const BufferInfo& info, const char* op) const {
    if (const auto host = const_cast<Supervisor&>(supervisor_).registry().remote_host(info.descriptor.identity)) {
        throw RequestError(ErrorCode::BAD_REQUEST,
                           std::string(op) + ": buffer " + to_string(info.descriptor.identity) +
                               " is on the host of remote node " + *host +
                               ", so this host has no fd of it; buffer.read and buffer.write move its bytes");
    }
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
            bad_request("a vmm buffer needs --on CHIP");
        }
        r.backend = device_backend(r.on);
    } else if (backend == "symmetric") {
        const json& world = member(request, "world", "request");
        if (!world.is_array() || world.empty()) {
            bad_request("world: expected a non-empty array of chip paths");
        }
        for (const auto& chip : world) {
            if (!chip.is_string()) {
                bad_request("world: expected chip paths");
            }
            r.world.push_back(chip.get<std::string>());
        }
        r.backend = device_backend(r.world.front());
    } else {
        bad_request("backend: expected \"shm\", \"vmm\" or \"symmetric\", got \"" + backend + "\"");
    }
    const BufferDescriptor d = supervisor_.create_buffer(r);
    access_.set_owner(d.identity, peer.uid);
    log_->debug("created buffer {} ({} bytes, {}) for uid {}", to_string(d.identity), d.nbytes,
                to_string(Backend{d.backend}), peer.uid);
    return {{"buffer", buffer_entry(*supervisor_.registry().find(d.identity))}};
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
        // Tolerant: a step runs once the tasks before it over its bytes have finished, however they ended.
        scheduler_.add(id, stored.name, footprint, scheduler::NO_LANE, true);
        dispatch_ready_locked(to_dispatch);
    }
    dispatch(std::move(to_dispatch));
}

void Service::handle_buffer_release(const json& request, const Reply& reply, const Peer& peer) {
    const BufferInfo info = live_buffer(request);
    const CanonicalIdentity id = info.descriptor.identity;
    if (const auto module = supervisor_.module_of_buffer(id)) {
        bad_request("buffer " + string_member(request, "buffer", "request") + " holds the image of module " + *module +
                    "; it is released when the module is replaced or the daemon stops");
    }
    access_.require_owner(peer, id, "buffer.release", "release");
    // Nothing new may name the buffer from here on; the step over the whole of it runs once every task and
    // transfer queued over it before has finished, and only then are its bytes freed.
    supervisor_.begin_release(id);
    const bool remote = supervisor_.registry().remote_host(id).has_value();
    schedule_step("buffer.release", byte_range_views(info.descriptor, 0, info.descriptor.nbytes, TensorTag::OUTPUT),
                  reply, "buffer release: the daemon stopped before the tasks queued over the buffer finished",
                  [this, id, remote](std::uint64_t step, const Reply& once) {
                      const auto release = [this, id, step, once] {
                          const std::uint64_t start = worker::monotonic_ns();
                          ErrorCode code = ErrorCode::OK;
                          std::string message;
                          try {
                              json answer = json::object();
                              if (const auto warning = supervisor_.release_buffer(id)) {
                                  answer["warning"] = *warning;
                              }
                              access_.forget(id);
                              once(std::move(answer));
                          } catch (...) {
                              std::tie(code, message) = current_error();
                              once(error_reply(error_code_name(code), message));
                          }
                          on_result(step, TaskResult{step, code, message, start, worker::monotonic_ns()});
                      };
                      if (remote) {
                          // Released by its host, a round trip away: not on the io thread.
                          boost::asio::post(slow_, release);
                      } else {
                          release();
                      }
                  });
}

void Service::handle_module_load(const json& request, const Reply& reply) {
    const std::string name = string_member(request, "name", "request");
    std::vector<std::byte> image = decode_data(string_member(request, "data", "request"));
    if (request.contains("format")) {
        // Optional: a client's statement of the format, checked against the bytes (which alone decide).
        const std::string stated = string_member(request, "format", "request");
        if (stated != "ptx" && stated != "cubin" && stated != "fatbin") {
            bad_request("format: expected \"ptx\", \"cubin\" or \"fatbin\", got \"" + stated + "\"");
        }
        const auto found = detect_module_format(image);
        if (found && (stated == "ptx") != (*found == ModuleFormat::PTX)) {
            bad_request("module " + name + ": format says " + stated + " but the image is " + to_string(*found));
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
