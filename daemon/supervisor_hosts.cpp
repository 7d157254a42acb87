// Copies across hosts (docs/multihost.md, "Copies across hosts"): the one kernel a task may run with an input on
// another host than its worker. Such a copy runs on the link of the remote node involved, which moves the bytes
// between a POSIX_SHM buffer of this host and the node's over a Read or a Write stream; a copy between two remote
// hosts runs in two stages through a staging buffer of this host.
#include "daemon/supervisor.h"
#include "worker/worker_loop.h"

#include <chrono>
#include <cstring>

namespace canopy::daemon {

namespace {

// "/hb" for the remote node at that path, "this host" for "".
std::string host_name(const std::string& host) {
    return host.empty() ? std::string("this host") : "the host of remote node " + host;
}

} // namespace

std::string Supervisor::host_of(const BufferDescriptor& d) const {
    return buffers_.remote_host(d.identity).value_or("");
}

bool Supervisor::crosses_hosts(const TaskRequest& request) const {
    if (request.kernel != "copy" || request.args.tensors.size() != 2) {
        return false;
    }
    const auto& in = request.args.tensors[0].tensor.buffer;
    const auto& out = request.args.tensors[1].tensor.buffer;
    return host_of(in) != host_of(out);
}

ChildSlot* Supervisor::remote_slot(const std::string& host) const {
    for (const auto& slot : slots_) {
        if (slot->spec.kind == ChildKind::REMOTE && slot->path == host) {
            return slot.get();
        }
    }
    return nullptr;
}

Supervisor::Route Supervisor::route_of(const TaskRequest& request) const {
    if (request.kernel == "copy") {
        // A copy across hosts may name the remote node itself: it runs on the node's link.
        std::string_view name = request.worker;
        while (!name.empty() && name.front() == '/') {
            name.remove_prefix(1);
        }
        for (const auto& slot : slots_) {
            if (slot->spec.kind == ChildKind::REMOTE && slot->spec.name == name) {
                if (!crosses_hosts(request)) {
                    throw RequestError(ErrorCode::UNKNOWN_WORKER,
                                       "'" + request.worker +
                                           "' is a remote node, not a worker; name one of its chips or subs (a copy "
                                           "across hosts alone may name the node)");
                }
                return {slot.get(), "", ChildKind::SUB, 0};
            }
        }
    }
    return resolve(request.worker);
}

// Either side of a copy across hosts: a live buffer of some host, as its registration says. On this host, a
// POSIX_SHM buffer (the link maps it by name) or a device buffer of one chip (staged through a POSIX_SHM one).
void Supervisor::check_copy_side(const BufferDescriptor& d, std::size_t i, bool accepted) const {
    if (live_remote(d, i, accepted)) {
        return;
    }
    const Backend backend{d.backend};
    if (backend != Backend::POSIX_SHM && backend != Backend::SIM_VMM && backend != Backend::CUDA_VMM) {
        throw RequestError(ErrorCode::UNREACHABLE_BUFFER,
                           "copy across hosts: " + arg_field(i) + " is a " + to_string(backend) +
                               " arena of this host; bytes cross hosts from and to posix_shm and device buffers");
    }
    if (d.identity.owner_instance != buffers_.owner_instance()) {
        // No remote host's buffer (live_remote refused a stale one).
        throw RequestError(ErrorCode::UNKNOWN_BUFFER, arg_field(i) + ": no buffer " + to_string(d.identity));
    }
    check_own_live(d, i, accepted);
    if (!buffers_.find(d.identity)->world.empty()) {
        throw RequestError(ErrorCode::UNREACHABLE_BUFFER, "copy across hosts: " + arg_field(i) +
                                                              " is a symmetric buffer; copy one rank's copy to "
                                                              "a buffer of its chip first");
    }
}

// Where a copy across hosts runs, and what both its sides must be. Its worker is on its output's host (naming a
// remote node itself, either side may be on the node's host). Both views are contiguous and of one dtype (the bytes
// move as they are).
void Supervisor::check_copy_across(const Route& route, const TaskRequest& request) const {
    const std::string in_host = host_of(request.args.tensors[0].tensor.buffer);
    const std::string out_host = host_of(request.args.tensors[1].tensor.buffer);
    const bool remote = route.slot->spec.kind == ChildKind::REMOTE;
    const std::string worker_host = remote ? route.slot->path : "";
    const bool names_node = remote && route.target.empty();
    if (names_node ? worker_host != in_host && worker_host != out_host : worker_host != out_host) {
        throw RequestError(ErrorCode::UNREACHABLE_BUFFER,
                           "args[1]: buffer " + to_string(request.args.tensors[1].tensor.buffer.identity) + " is on " +
                               host_name(out_host) + ", which " + route.path() +
                               " cannot reach (a copy across hosts runs on a worker of its output's host)");
    }
    for (std::size_t i = 0; i < 2; ++i) {
        const Tensor& t = request.args.tensors[i].tensor;
        if (!tensor_is_contiguous(t)) {
            throw RequestError(ErrorCode::BAD_REQUEST, "copy across hosts: " + arg_field(i) +
                                                           " is a strided view; both views must be contiguous");
        }
    }
    const Tensor& in = request.args.tensors[0].tensor;
    const Tensor& out = request.args.tensors[1].tensor;
    if (in.dtype != out.dtype) {
        throw RequestError(ErrorCode::BAD_REQUEST, std::string("copy across hosts: args[0] is ") +
                                                       to_string(DataType{in.dtype}) + ", args[1] " +
                                                       to_string(DataType{out.dtype}) +
                                                       "; the bytes move as they are, so the dtypes must agree");
    }
}

// The copy runs on the link of the remote node involved. Between two remote hosts, and between a remote host and a
// device buffer of this one, it runs in two stages through a POSIX_SHM staging buffer of this host.
ChildSlot* Supervisor::route_across(TaskRequest& request, TaskCallback& done, PendingTask& task) {
    if (!request.after.empty()) {
        throw RequestError(ErrorCode::BAD_REQUEST, "a copy across hosts cannot be ordered after other tasks");
    }
    const BufferDescriptor& in = request.args.tensors[0].tensor.buffer;
    const BufferDescriptor& out = request.args.tensors[1].tensor.buffer;
    const std::string in_host = host_of(in);
    const std::string out_host = host_of(out);
    const auto link = [&](const std::string& host) { return Route{remote_slot(host), "", ChildKind::SUB, 0}; };
    const auto device = [](const BufferDescriptor& d) { return AddressSpace{d.address_space} == AddressSpace::DEVICE; };
    const auto chip = [&](const BufferDescriptor& d) { return resolve(buffers_.find(d.identity)->creator); };
    if (!in_host.empty() && !out_host.empty()) {
        relay(request, done, task.task_id, link(in_host), link(out_host));
        return nullptr;
    }
    if (in_host.empty() && device(in)) {
        relay(request, done, task.task_id, chip(in), link(out_host));
        return nullptr;
    }
    if (out_host.empty() && device(out)) {
        relay(request, done, task.task_id, link(in_host), chip(out));
        return nullptr;
    }
    task = PendingTask{task.task_id,
                       "copy",
                       "",
                       request.launch,
                       encode_task_args(request.args),
                       std::move(done),
                       request.timeout,
                       false,
                       {},
                       request.keep_failure,
                       request.group};
    return remote_slot(in_host.empty() ? out_host : in_host);
}

void Supervisor::relay(const TaskRequest& request, TaskCallback& done, std::uint64_t task_id, const Route& first,
                       const Route& second) {
    auto work = [this, request, done = std::move(done), task_id, first, second]() mutable {
        const auto fail = [&](ErrorCode code, const std::string& message) {
            if (!done) {
                // Taken by the first stage, which answers the task from then on.
                log_->error("task {}: copy across hosts: {}", task_id, message);
                return;
            }
            note_failure(task_id, request.keep_failure, code);
            done(TaskResult{task_id, code, message, 0, 0});
        };
        // This runs on the relays' thread, which nothing above catches for: every failure answers the task.
        try {
            run_relay(request, done, task_id, first, second);
        } catch (const RequestError& e) {
            fail(e.code(), e.what());
        } catch (const std::exception& e) {
            fail(ErrorCode::BAD_REQUEST, std::string("copy across hosts: ") + e.what());
        }
    };
    relays_.post(std::move(work));
}

// Throws RequestError before it takes `done` (the staging buffer could not be made).
void Supervisor::run_relay(const TaskRequest& request, TaskCallback& done, std::uint64_t task_id, const Route& first,
                           const Route& second) {
    const Tensor in = request.args.tensors[0].tensor;
    const Tensor out = request.args.tensors[1].tensor;
    BufferRequest staging_request;
    staging_request.nbytes = tensor_extent_bytes(in);
    BufferDescriptor staging;
    try {
        staging = create_buffer(staging_request);
    } catch (const RequestError&) {
        throw;
    } catch (const std::exception& e) {
        // No room in this host's /dev/shm, a full buffer table: the copy fails, naming the staging buffer.
        throw RequestError(ErrorCode::BAD_REQUEST, "copy across hosts: the staging buffer of " +
                                                       std::to_string(staging_request.nbytes) +
                                                       " bytes on this host could not be made: " + e.what());
    }
    Tensor staged = in;
    staged.buffer = staging;
    staged.byte_offset = 0;
    const auto encode = [](const Tensor& a, const Tensor& b) {
        TaskArgs args;
        args.tensors.push_back({a, TensorTag::INPUT});
        args.tensors.push_back({b, TensorTag::OUTPUT});
        return encode_task_args(args);
    };
    // A stage on a chip of this host is timed by this supervisor; one on a link by the link.
    const auto stage = [&](const Route& route, std::vector<std::byte> blob, TaskCallback cb) {
        return PendingTask{next_task_id_++,
                           "copy",
                           route.target,
                           request.launch,
                           std::move(blob),
                           std::move(cb),
                           request.timeout,
                           route.slot->spec.kind != ChildKind::NODE && route.slot->spec.kind != ChildKind::REMOTE,
                           {},
                           false,
                           request.group};
    };
    const std::string what = "copy across hosts, from " + host_name(host_of(in.buffer)) + " to " +
                             host_name(host_of(out.buffer)) + " through staging buffer " + to_string(staging.identity);
    const bool keep = request.keep_failure;
    auto finish = [this, task_id, keep, staging, what](TaskCallback& cb, const TaskResult& r, std::uint64_t start) {
        (void)release_buffer(staging.identity);
        if (!r.ok()) {
            note_failure(task_id, keep, r.code);
        }
        cb(TaskResult{task_id, r.code, r.ok() ? std::string() : what + ": " + r.message, start, r.end_ns});
    };
    PendingTask then = stage(second, encode(staged, out), {});
    ChildSlot* const second_slot = second.slot;
    auto after_first = [this, done = std::move(done), finish, then = std::move(then), second_slot,
                        timeout = request.timeout](TaskResult first_result) mutable {
        const std::uint64_t start = first_result.start_ns;
        if (!first_result.ok()) {
            finish(done, first_result, start);
            return;
        }
        // The task's timeout bounds the whole transfer: the second stage gets what the first left of it. Both
        // stages run on this host (a link or a chip), so their times are this host's CLOCK_MONOTONIC.
        if (timeout.count() > 0) {
            const std::uint64_t now = worker::monotonic_ns();
            const auto spent = std::chrono::duration_cast<std::chrono::milliseconds>(
                std::chrono::nanoseconds(start != 0 && now > start ? now - start : 0));
            if (spent >= timeout) {
                finish(done,
                       TaskResult{0, ErrorCode::TIMEOUT,
                                  "the task's timeout of " + std::to_string(timeout.count()) +
                                      " ms ran out in its first stage, which took " + std::to_string(spent.count()) +
                                      " ms",
                                  start, first_result.end_ns},
                       start);
                return;
            }
            then.timeout = timeout - spent;
        }
        then.done = [done = std::move(done), finish, start, timeout, left = then.timeout](TaskResult r) mutable {
            if (r.code == ErrorCode::TIMEOUT && timeout.count() > 0) {
                r.message = "the task's timeout of " + std::to_string(timeout.count()) +
                            " ms ran out in its second stage, which had the " + std::to_string(left.count()) +
                            " ms its first stage left (" + r.message + ")";
            }
            finish(done, r, start);
        };
        enqueue(*second_slot, std::move(then));
    };
    log_->debug("task {}: {}", task_id, what);
    enqueue(*first.slot, stage(first, encode(in, staged), std::move(after_first)));
}

} // namespace canopy::daemon
