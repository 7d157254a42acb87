#pragma once
// ChildSlot: the supervisor's record of one child position (/chip0, /sub1, /node0) across its
// incarnations: state, counters, and the live incarnation's mailbox, control socket and threads.
//
// Thread safety: every mutable field is guarded by `mu`, except the thread handles, which only the
// supervisor's event thread and stop() touch.

#include "daemon/supervisor_options.h"
#include "daemon/task.h"
#include "ipc/mailbox_parent.h"
#include "ipc/unique_fd.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <sys/types.h>
#include <thread>
#include <unordered_map>
#include <vector>

namespace canopy::daemon {

class RemoteTasks;

enum class WorkerState { STARTING, RUNNING, RESTARTING, DEAD, STOPPED };

struct WorkerStatus {
    std::string path;
    std::string kind;    // "chip", "sub", "node"
    std::string backend; // "sim", "cuda" for chips
    std::uint32_t device = 0;
    pid_t pid = -1;
    WorkerState state = WorkerState::STARTING;
    std::uint32_t restarts = 0;
    std::uint64_t tasks_done = 0;
    std::uint64_t tasks_failed = 0;
    // Tasks this supervisor holds for the worker: accepted and not yet in its mailbox, and in the mailbox.
    std::uint64_t queued = 0;
    std::uint64_t in_flight = 0;
    double uptime_s = 0;
    std::string last_exit;
};
const char* to_string(WorkerState state) noexcept;

struct PendingTask {
    std::uint64_t task_id = 0;
    std::string kernel;
    std::string target; // path below the child
    LaunchConfig launch{};
    std::vector<std::byte> blob;
    TaskCallback done;
    std::chrono::milliseconds timeout{0};
    bool enforce_timeout = false;       // false when a nested supervisor enforces it below
    std::vector<std::uint64_t> after{}; // TaskRequest::after
    bool keep_failure = false;          // TaskRequest::keep_failure
    std::uint64_t group = 0;            // TaskRequest::group
    bool remote_call = false;           // a task of a remote node's worker: it goes out on the L4's Tasks stream
};

// The first call id of the L4's own Tasks stream (RemoteTasks): a task sent on it is in flight under its call id,
// beside the frames of the link's mailbox, whose dispatch ids stay far below.
inline constexpr std::uint64_t FIRST_REMOTE_CALL = std::uint64_t{1} << 63;

// One incarnation of a child process.
struct Incarnation {
    std::uint32_t generation = 0;
    pid_t pid = -1;
    std::unique_ptr<ipc::MailboxParent> mailbox;
    ipc::UniqueFd control;
    std::atomic<bool> ended{false};
    // Set while Supervisor::spawn, outside the slot's mu, makes the control socket and the threads and asks the
    // zygote to fork: until it clears it (and sets zygote_epoch), nothing else may end this incarnation, which would
    // free what spawn is still filling in. Guarded by the slot's mu; cleared with a notify of setup_done.
    bool setting_up = false;
    std::uint32_t zygote_epoch = 0; // of the zygote that forked it; guarded by the slot's mu
    bool poison_killed = false;     // the mailbox was found poisoned and the child killed; guarded by the slot's mu
    std::thread completion_thread;
    std::thread control_thread;
    std::chrono::steady_clock::time_point spawned_at;
    // Nested supervisors: the workers of the last STATUS_REPLY, parsed once on arrival (a remote node's are looked
    // up for every task sent to it), and when it arrived; guarded by the slot's mu.
    std::optional<std::vector<WorkerStatus>> reported;
    std::chrono::steady_clock::time_point status_at;
    // Remote nodes: the L4's own Tasks stream on the session the link attached, opened at the link's READY, and
    // the id of its last call. Guarded by the slot's mu, but never destroyed under it: its end waits for its
    // thread, which takes that lock.
    std::shared_ptr<RemoteTasks> tasks;
    std::uint64_t last_call = FIRST_REMOTE_CALL;
    // A lost host whose link the supervisor ends (Supervisor::lose_host_locked), and whether it has.
    bool end_link = false;
    bool link_killed = false;
};

struct ChildSlot {
    std::uint32_t index = 0;
    ChildSpec spec;
    std::string path;

    std::mutex mu;
    std::condition_variable setup_done; // live->setting_up was cleared
    WorkerState state = WorkerState::STARTING;
    std::uint32_t generation = 0; // of the newest incarnation
    std::uint32_t restarts = 0;
    std::uint32_t failures = 0; // deaths since the child last stayed up HEALTHY_UPTIME
    std::uint64_t tasks_done = 0;
    std::uint64_t tasks_failed = 0;
    std::string last_exit;   // "killed by signal 9 (SIGKILL)"
    bool fatal = false;      // the child reported it cannot serve (last_exit says why): it is not restarted
    bool lost = false;       // the child reported LOST (last_exit says why): it restarts without spending its budget
    std::string lost_reason; // the text of this incarnation's LOST
    std::string last_lost_reason; // the previous incarnation's LOST text when it ended LOST, else empty
    std::chrono::steady_clock::time_point running_since;
    std::unique_ptr<Incarnation> live;
    std::deque<PendingTask> pending;                          // accepted, not yet in the mailbox
    std::unordered_map<std::uint64_t, PendingTask> in_flight; // by dispatch id
    std::uint64_t oldest_dispatch = 0;                        // the frame the worker runs now (the oldest in flight)
    std::chrono::steady_clock::time_point deadline = std::chrono::steady_clock::time_point::max();
    std::uint64_t timed_out_task = 0; // the task whose timeout killed the current incarnation
    // Nested nodes: tasks done and failed per worker below, by its path below the node ("chip1"), counted as
    // their results come back.
    std::map<std::string, std::pair<std::uint64_t, std::uint64_t>> nested_counts;

    // Waits until the live incarnation, if any, is no longer being set up (Incarnation::setting_up). REQUIRES
    // `lock` holds mu.
    void wait_set_up(std::unique_lock<std::mutex>& lock) {
        setup_done.wait(lock, [this] { return !live || !live->setting_up; });
    }
};

// Counts a finished task on its worker's counters; the supervisor's own control frames (@release) do
// not count. REQUIRES the slot's mu.
void count_result(ChildSlot& slot, const PendingTask& task, ErrorCode code);

} // namespace canopy::daemon
