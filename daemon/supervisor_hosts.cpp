// Copies across hosts (docs/multihost.md, "Copies across hosts"): the one kernel a task may run with an input on
// another host than its worker. Such a copy runs on the link of the remote node involved, which moves the bytes
// between a POSIX_SHM buffer of this host and the node's over a Read or a Write stream; a copy between two remote
// hosts runs in two stages through a staging buffer of this host.
#include "daemon/supervisor.h"

#include <cstring>

namespace canopy::daemon {

namespace {

std::string arg_name(std::size_t i) {
    return "args[" + std::to_string(i) + "]";
}

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

// Either side of a copy across hosts: a live buffer of some host, as its registration says; a POSIX_SHM one where
// it is this host's.
void Supervisor::check_copy_side(const BufferDescriptor& d, std::size_t i) const {
    const std::string host = host_of(d);
    if (!host.empty()) {
        if (!(buffers_.find(d.identity)->descriptor == d)) {
            throw RequestError(ErrorCode::INVALID_DESCRIPTOR,
                               arg_name(i) + ": descriptor does not match buffer " + to_string(d.identity));
        }
        return;
    }
    if (Backend{d.backend} != Backend::POSIX_SHM) {
        throw RequestError(ErrorCode::UNREACHABLE_BUFFER,
                           "copy across hosts: " + arg_name(i) + " is a " + to_string(Backend{d.backend}) +
                               " buffer of this host; bytes cross hosts from and to posix_shm buffers (copy a "
                               "device buffer to one on its chip first)");
    }
    if (d.identity.owner_instance != buffers_.owner_instance()) {
        if (const auto why = buffers_.stale_reason(d.identity)) {
            throw RequestError(ErrorCode::STALE_BUFFER, arg_name(i) + ": " + *why);
        }
        throw RequestError(ErrorCode::UNKNOWN_BUFFER, arg_name(i) + ": no buffer " + to_string(d.identity));
    }
    check_buffer(Route{nullptr, "", ChildKind::SUB, 0}, d, i);
}

// Where a copy across hosts runs, and what both its sides must be. Its worker is on its output's host (naming a
// remote node itself, either side may be on the node's host). Both sides are POSIX_SHM where they are on this host
// (the link maps them by name), and contiguous views of one dtype (the bytes move as they are).
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
            throw RequestError(ErrorCode::BAD_REQUEST, "copy across hosts: " + arg_name(i) +
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

// The copy runs on the link of the remote node involved; between two remote hosts, in two stages.
ChildSlot* Supervisor::route_across(TaskRequest& request, TaskCallback& done, PendingTask& task) {
    if (!request.after.empty()) {
        throw RequestError(ErrorCode::BAD_REQUEST, "a copy across hosts cannot be ordered after other tasks");
    }
    const std::string in_host = host_of(request.args.tensors[0].tensor.buffer);
    const std::string out_host = host_of(request.args.tensors[1].tensor.buffer);
    if (!in_host.empty() && !out_host.empty()) {
        relay(request, done, task.task_id, in_host, out_host);
        return nullptr;
    }
    ChildSlot* link = remote_slot(in_host.empty() ? out_host : in_host);
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
    return link;
}

void Supervisor::relay(const TaskRequest& request, TaskCallback& done, std::uint64_t task_id, const std::string& from,
                       const std::string& to) {
    const Tensor in = request.args.tensors[0].tensor;
    const Tensor out = request.args.tensors[1].tensor;
    BufferRequest staging_request;
    staging_request.nbytes = tensor_extent_bytes(in);
    const BufferDescriptor staging = create_buffer(staging_request);
    Tensor staged = in;
    staged.buffer = staging;
    staged.byte_offset = 0;
    const auto encode = [](const Tensor& a, const Tensor& b) {
        TaskArgs args;
        args.tensors.push_back({a, TensorTag::INPUT});
        args.tensors.push_back({b, TensorTag::OUTPUT});
        return encode_task_args(args);
    };
    ChildSlot* first = remote_slot(from);
    ChildSlot* second = remote_slot(to);
    const bool keep = request.keep_failure;
    const std::uint64_t group = request.group;
    const auto timeout = request.timeout;
    const LaunchConfig launch = request.launch;
    auto fail = [this, task_id, keep, staging](TaskCallback& cb, ErrorCode code, const std::string& message,
                                               std::uint64_t start, std::uint64_t end) {
        (void)release_buffer(staging.identity);
        note_failure(task_id, keep, code);
        cb(TaskResult{task_id, code, message, start, end});
    };
    std::vector<std::byte> second_blob = encode(staged, out);
    auto after_first = [this, done = std::move(done), fail, second, second_blob = std::move(second_blob), launch,
                        timeout, keep, group, task_id, staging, from, to](TaskResult first_result) mutable {
        if (!first_result.ok()) {
            fail(done, first_result.code, "copy across hosts, from " + from + " to " + to + ": " + first_result.message,
                 first_result.start_ns, first_result.end_ns);
            return;
        }
        const std::uint64_t start = first_result.start_ns;
        auto after_second = [this, done = std::move(done), fail, start, task_id, staging, from,
                             to](TaskResult second_result) mutable {
            if (!second_result.ok()) {
                fail(done, second_result.code,
                     "copy across hosts, from " + from + " to " + to + ": " + second_result.message, start,
                     second_result.end_ns);
                return;
            }
            (void)release_buffer(staging.identity);
            done(TaskResult{task_id, ErrorCode::OK, {}, start, second_result.end_ns});
        };
        enqueue(*second, PendingTask{next_task_id_++,
                                     "copy",
                                     "",
                                     launch,
                                     std::move(second_blob),
                                     std::move(after_second),
                                     timeout,
                                     false,
                                     {},
                                     false,
                                     group});
    };
    log_->debug("task {}: copy across hosts from {} to {} staged through buffer {}", task_id, host_name(from),
                host_name(to), to_string(staging.identity));
    enqueue(*first, PendingTask{next_task_id_++,
                                "copy",
                                "",
                                launch,
                                encode(in, staged),
                                std::move(after_first),
                                timeout,
                                false,
                                {},
                                false,
                                group});
}

} // namespace canopy::daemon
