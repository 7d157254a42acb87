// The tasks of remote nodes (docs/multihost.md): each goes out on the L4's own Tasks stream on the session the
// node's link attached (RemoteTasks), is in flight under its call id beside the link's mailbox frames, and
// completes from its reply on the stream's thread. A link that dies takes the stream with it: end_incarnation
// closes the stream and fails what it still had in flight, as it fails the mailbox's frames; a stream that ends
// while the link lives loses the host the same way.
#include "daemon/remote_link.h"
#include "daemon/remote_tasks.h"
#include "daemon/supervisor.h"

#include <charconv>
#include <csignal>

namespace canopy::daemon {

std::shared_ptr<RemoteTasks> Supervisor::open_remote_tasks(ChildSlot& slot, Incarnation& inc,
                                                           std::string_view session) {
    std::uint64_t id = 0;
    const auto [end, error] = std::from_chars(session.data(), session.data() + session.size(), id);
    if (error != std::errc{} || end != session.data() + session.size() || id == 0) {
        throw std::runtime_error("its link came up naming no session");
    }
    try {
        return std::make_shared<RemoteTasks>(
            *slot.spec.remote, remote_host_name(slot.path, *slot.spec.remote), id,
            [this, &slot, &inc](std::vector<RemoteReply>& replies) { on_remote_replies(slot, inc, replies); },
            [this, &slot, &inc](const std::string& why) {
                std::lock_guard lock(slot.mu);
                if (slot.live.get() == &inc && !stopping_) {
                    lose_host_locked(slot, inc, why);
                }
            });
    } catch (const std::exception& e) {
        throw std::runtime_error("no task stream could be opened: " + std::string(e.what()));
    }
}

void Supervisor::lose_host_locked(ChildSlot& slot, Incarnation& inc, const std::string& why) {
    if (!slot.lost) {
        slot.lost = true;
        slot.lost_reason = remote_host_name(slot.path, *slot.spec.remote) + " lost: " + why;
        slot.last_exit = slot.lost_reason;
        inc.end_link = true;
    }
    // A link that reported the loss itself exits on its own. One that did not is ended once its pid is known: the
    // stream may end before the link's READY is handled, which can overtake the zygote's SPAWNED, and READY then
    // comes here again. Under slot.mu with slot.live == &inc: its exit has not been handled.
    if (inc.end_link && !inc.link_killed && inc.pid > 0) {
        inc.link_killed = true;
        launcher_->kill(inc.pid, SIGKILL);
    }
    notify_events();
}

void Supervisor::on_remote_replies(ChildSlot& slot, Incarnation& inc, std::vector<RemoteReply>& replies) {
    std::vector<std::pair<TaskCallback, TaskResult>> results;
    {
        std::lock_guard lock(slot.mu);
        if (slot.live.get() != &inc) {
            return; // the incarnation ended: end_incarnation failed what was in flight
        }
        bool failed = false;
        for (RemoteReply& reply : replies) {
            const auto it = slot.in_flight.find(reply.call_id);
            if (reply.call_id < FIRST_REMOTE_CALL || it == slot.in_flight.end()) {
                continue; // not a call of this stream's
            }
            const std::uint64_t task_id = it->second.task_id;
            failed |= !take_result_locked(
                slot, it, TaskResult{task_id, reply.code, std::move(reply.message), reply.start_ns, reply.end_ns},
                results);
        }
        if (failed) {
            fail_ordered_pending_locked(slot, results);
        }
        fill_locked(slot);
    }
    for (auto& [done, result] : results) {
        if (done) {
            done(std::move(result));
        }
    }
    if (!results.empty()) {
        notify_drain();
    }
}

} // namespace canopy::daemon
