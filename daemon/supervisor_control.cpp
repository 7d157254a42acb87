#include "daemon/json_codec.h"
#include "daemon/supervisor.h"
#include "ipc/child_message.h"
#include "ipc/fd_passing.h"
#include "ipc/sys_error.h"

#include <algorithm>
#include <cstring>
#include <fcntl.h>
#include <sys/socket.h>

namespace canopy::daemon {

void Supervisor::control_loop(ChildSlot& slot, Incarnation& inc) {
    std::vector<std::byte> buffer(ipc::MAX_CHILD_MESSAGE_BYTES);
    for (;;) {
        ipc::ChildMessage m{};
        std::vector<ipc::UniqueFd> fds;
        std::size_t n = 0;
        try {
            n = ipc::recv_message(inc.control.get(), buffer, fds);
        } catch (const ipc::SysError&) {
            return; // the socket is gone; the child's exit is handled by the zygote event
        } catch (const std::exception& e) {
            // A message whose fds could not all be received (this process is out of fds) is dropped whole;
            // the channel stays open for the next one.
            log_->warn("worker {}: dropped a control message: {}", slot.path, e.what());
            continue;
        }
        if (n < sizeof m) {
            return; // EOF, or a child that speaks something else: its exit is handled by the zygote event
        }
        std::memcpy(&m, buffer.data(), sizeof m);
        if (static_cast<ipc::ChildMessageType>(m.type) == ipc::ChildMessageType::STATUS_REPLY) {
            std::vector<WorkerStatus> workers;
            try {
                workers = workers_from_json(
                    std::string_view(reinterpret_cast<const char*>(buffer.data()) + sizeof m, n - sizeof m));
            } catch (const std::exception& e) {
                // The child's workers keep the tree it reported before.
                log_->warn("worker {}: its status report of {} bytes is unreadable: {}", slot.path, n - sizeof m,
                           e.what());
                continue;
            }
            {
                std::lock_guard lock(slot.mu);
                inc.reported = std::move(workers);
                inc.status_at = clock_->now();
            }
            changed();
            continue;
        }
        if (n != sizeof m) {
            return;
        }
        switch (static_cast<ipc::ChildMessageType>(m.type)) {
        case ipc::ChildMessageType::READY: {
            bool up = false;
            pid_t pid = -1;
            std::uint32_t restarts = 0;
            // A remote node's tasks go out on the L4's own stream, opened before the node runs; closed outside
            // the slot's lock.
            std::shared_ptr<RemoteTasks> tasks;
            std::string no_tasks;
            if (slot.spec.kind == ChildKind::REMOTE) {
                try {
                    tasks = open_remote_tasks(
                        slot, inc, std::string_view(m.text, std::min<std::size_t>(m.text_len, sizeof m.text)));
                } catch (const std::exception& e) {
                    no_tasks = e.what();
                }
            }
            {
                std::lock_guard lock(slot.mu);
                if (inc.pid <= 0 && m.pid > 0) {
                    inc.pid = m.pid; // READY can overtake the zygote's SPAWNED event
                }
                if (slot.live.get() == &inc && slot.state == WorkerState::STARTING &&
                    (!no_tasks.empty() || slot.lost)) {
                    // No stream, or one that ended before this READY was handled (and, when the pid was not known
                    // yet, could not end the link): the host is lost.
                    lose_host_locked(slot, inc, no_tasks);
                } else if (slot.live.get() == &inc && slot.state == WorkerState::STARTING) {
                    inc.tasks = std::move(tasks);
                    slot.state = WorkerState::RUNNING;
                    slot.running_since = clock_->now();
                    queue_module_replays_locked(slot);
                    fill_locked(slot);
                    up = true;
                }
                // Read here: the event thread sets the pid from the zygote's SPAWNED under the same lock.
                pid = inc.pid;
                restarts = slot.restarts;
            }
            if (up && restarts > 0) {
                log_->info("worker {} (pid {}) is up again after {} restarts", slot.path, pid, restarts);
            }
            if (up) {
                notify_events();
                changed();
            }
            continue;
        }
        case ipc::ChildMessageType::FATAL: {
            std::lock_guard lock(slot.mu);
            slot.fatal = true;
            slot.last_exit = "fatal: " + std::string(m.text, std::min<std::size_t>(m.text_len, sizeof m.text));
            break;
        }
        case ipc::ChildMessageType::LOST: {
            std::lock_guard lock(slot.mu);
            slot.lost = true;
            slot.lost_reason = std::string(m.text, std::min<std::size_t>(m.text_len, sizeof m.text));
            // The exit may have been handled first: the reason leads either way.
            slot.last_exit = inc.ended ? slot.lost_reason + "; " + slot.last_exit : slot.lost_reason;
            break;
        }
        case ipc::ChildMessageType::FD_REQUEST:
            serve_fd_request(slot, inc, m);
            break;
        case ipc::ChildMessageType::FD_OFFER:
            // Accepted only for a creation this supervisor waits for, from the chip it asked; else the fd closes.
            // A nested supervisor passes its parent's buffers up.
            if (fds.size() == 1) {
                if (m.descriptor.identity.owner_instance != buffers_.owner_instance() && parent_ != nullptr) {
                    try {
                        parent_->relay_offer(m.descriptor, m.rank, fds[0].get());
                    } catch (const std::exception&) {
                        // The parent is gone; its creation fails by its own timeout.
                    }
                } else {
                    (void)buffers_.offer_fd(m.descriptor, slot.path, m.rank, std::move(fds[0]));
                }
            }
            break;
        default:
            break;
        }
        notify_events();
    }
}

void Supervisor::serve_fd_request(const ChildSlot& slot, Incarnation& inc, const ipc::ChildMessage& request) {
    const BufferDescriptor& d = request.descriptor;
    ipc::ChildMessage reply{};
    reply.type = static_cast<std::uint32_t>(ipc::ChildMessageType::FD_REPLY);
    reply.rank = ipc::NOT_SYMMETRIC;
    auto refuse = [&](ErrorCode code, const std::string& text) {
        reply.code = static_cast<std::uint16_t>(code);
        reply.text_len = static_cast<std::uint16_t>(std::min(text.size(), sizeof reply.text));
        std::memcpy(reply.text, text.data(), reply.text_len);
        ipc::send_struct(inc.control.get(), reply);
    };
    // The worker that asks: the child itself, or (from a nested supervisor) a worker below it.
    std::string requester = slot.path;
    if (slot.spec.kind == ChildKind::NODE) {
        const std::string named(request.text, std::min<std::size_t>(request.text_len, sizeof request.text));
        if (named.rfind(slot.path + "/", 0) == 0) {
            requester = named;
        }
    }
    try {
        validate_descriptor(d);
        std::vector<ipc::UniqueFd> fds;
        if (d.identity.owner_instance != buffers_.owner_instance() && parent_ != nullptr) {
            worker::VmmFds got = reexported_fds(d, requester);
            fds = std::move(got.fds);
            reply.rank = got.symmetric ? static_cast<std::uint16_t>(got.rank) : ipc::NOT_SYMMETRIC;
        } else {
            const auto info = buffers_.find(d.identity);
            if (!info || !(info->descriptor == d)) {
                const bool stale = buffers_.lookup(d.identity) == BufferLookup::STALE;
                refuse(stale ? ErrorCode::STALE_BUFFER : ErrorCode::UNKNOWN_BUFFER,
                       "buffer " + to_string(d.identity) + " is not live here");
                return;
            }
            if (!info->world.empty()) {
                const auto it = std::find(info->world.begin(), info->world.end(), requester);
                if (it == info->world.end()) {
                    refuse(ErrorCode::UNREACHABLE_BUFFER,
                           requester + " is not in the world of " + to_string(d.identity));
                    return;
                }
                reply.rank = static_cast<std::uint16_t>(it - info->world.begin());
            }
            fds = buffers_.dup_fds(d.identity);
        }
        if (fds.empty() || fds.size() > ipc::MAX_FDS_PER_MESSAGE) {
            refuse(ErrorCode::UNREACHABLE_BUFFER, "buffer " + to_string(d.identity) + " has no file descriptor");
            return;
        }
        std::vector<int> raw;
        for (const auto& fd : fds) {
            raw.push_back(fd.get());
        }
        reply.world = static_cast<std::uint16_t>(raw.size());
        ipc::send_struct(inc.control.get(), reply, raw);
    } catch (const WireError& e) {
        refuse(e.code(), e.what());
    } catch (const worker::ImportError& e) {
        refuse(e.code(), e.what());
    } catch (const std::exception& e) {
        refuse(ErrorCode::UNREACHABLE_BUFFER, e.what());
    }
}

worker::VmmFds Supervisor::reexported_fds(const BufferDescriptor& d, const std::string& requester) {
    const std::string key = to_string(d.identity) + " " + requester;
    std::lock_guard lock(reexport_mu_);
    auto it = reexports_.find(key);
    if (it == reexports_.end()) {
        // Asked of the parent once per worker; a released buffer's entries go in broadcast_release.
        it = reexports_.emplace(key, std::pair(d.identity, parent_->fetch_fds(d, requester))).first;
    }
    const worker::VmmFds& kept = it->second.second;
    worker::VmmFds out;
    for (const auto& fd : kept.fds) {
        out.fds.emplace_back(ipc::sys_check(::fcntl(fd.get(), F_DUPFD_CLOEXEC, 0), "fcntl(F_DUPFD_CLOEXEC)"));
    }
    out.symmetric = kept.symmetric;
    out.rank = kept.rank;
    return out;
}

void Supervisor::send_worker_restart(Incarnation& inc, const std::string& target) {
    ipc::ChildMessage m{};
    m.type = static_cast<std::uint32_t>(ipc::ChildMessageType::WORKER_RESTART);
    m.text_len = static_cast<std::uint16_t>(std::min(target.size(), sizeof m.text));
    std::memcpy(m.text, target.data(), m.text_len);
    try {
        ipc::send_struct(inc.control.get(), m);
    } catch (const ipc::SysError& e) {
        throw RequestError(ErrorCode::WORKER_DIED, std::string("the node did not take the request: ") + e.what());
    }
}

} // namespace canopy::daemon
