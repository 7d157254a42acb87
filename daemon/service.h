#pragma once
// Service: canopyd as a whole. It owns the supervisor (process tree and buffers), the scheduler
// (dependency inference across every client's tasks), the task book, the control server and the
// optional metrics listener, and runs them on one io_context:
//   construct  maps preloads and forks the zygote (REQUIRES a single-threaded process)
//   run()      starts every child, listens, sends READY=1, serves until SIGTERM, SIGINT or a `shutdown`
//              request, then stops: STOPPING=1, no new connections, accepted tasks drain up to the
//              drain timeout (the rest fail), children exit, buffers are released; returns 0.
//
// Thread safety: request_stop() from any thread; everything else runs on the io thread, the supervisor's
// threads (task results) and one stopper thread, and shares state under mu_.

#include "config/config.h"
#include "daemon/access_policy.h"
#include "daemon/checker_pool.h"
#include "daemon/control_server.h"
#include "daemon/json_codec.h"
#include "daemon/metrics.h"
#include "daemon/metrics_listener.h"
#include "daemon/remote_server.h"
#include "daemon/supervisor.h"
#include "daemon/task_book.h"
#include "scheduler/scheduler.h"

#include <atomic>
#include <boost/asio/thread_pool.hpp>
#include <condition_variable>
#include <filesystem>
#include <memory>
#include <mutex>
#include <spdlog/logger.h>
#include <thread>

namespace canopy::daemon {

class Service {
public:
    Service(const config::Config& config, std::shared_ptr<spdlog::logger> log);
    ~Service();

    int run();
    void request_stop();

    Supervisor& supervisor() noexcept { return supervisor_; }

private:
    // control requests (service_handlers.cpp)
    // `run`: the tasks of a run or submit request as the fast path read them (daemon/run_request.h), or null.
    void handle(const nlohmann::json& request, RawRun* run, const Peer& peer, Reply reply,
                const Attachment& attachment);
    nlohmann::json handle_status() const;
    nlohmann::json handle_buffer_create(const nlohmann::json& request, const Peer& peer);
    // buffer_json and the buffer's owner ("owner_uid", null for the daemon's own buffers).
    nlohmann::json buffer_entry(const BufferInfo& info) const;
    Backend device_backend(const std::string& chip) const;
    // buffer.write and buffer.read (service_transfers.cpp); with an attachment, service_attachments.cpp.
    void handle_buffer_transfer(const nlohmann::json& request, const Reply& reply, bool write, const Peer& peer,
                                Attachment attachment);
    using TransferDone = std::function<void(ErrorCode, const std::string&, nlohmann::json)>;
    void transfer_through_chip(const BufferInfo& info, std::uint64_t offset, std::vector<std::byte> data,
                               std::uint64_t length, bool write, const TransferDone& done);
    // Whether the bytes of `info` reach this process only through a staging buffer: a cuda_vmm buffer (its chip
    // copies them) or a buffer of a remote node's host (its link moves them across). Throws RequestError
    // (STALE_BUFFER, with the reason) for a buffer of a remote host lost since the transfer was accepted.
    bool staged(const BufferInfo& info) const;
    // Copies [offset, offset + length) of a staged buffer from (`to_device`) or to byte 0 of the posix_shm
    // `staging`, on the buffer's chip or the link of its remote node, in `copy` tasks of at most 1 GiB; `done` runs
    // once, with the first failure or success, on a supervisor thread.
    void copy_through_chip(const BufferInfo& info, const BufferDescriptor& staging, std::uint64_t offset,
                           std::uint64_t length, bool to_device, std::function<void(const TaskResult&)> done);
    // A write whose bytes arrive as `attachment` (REQUIRES: size > 0, the range in the buffer): a step over the
    // range that reads the bytes into the buffer (through a staging buffer for cuda_vmm).
    void write_attachment(const BufferInfo& info, std::uint64_t offset, Attachment attachment, const Reply& reply);
    void receive_attachment(const BufferInfo& info, std::uint64_t offset, const Attachment& attachment,
                            const TransferDone& done);
    void receive_staged(const BufferInfo& info, std::uint64_t offset, const Attachment& attachment,
                        const TransferDone& done);
    // A read answered with the bytes as an attachment (REQUIRES: length > 0): a step over the range that ends once
    // the bytes are written to the client (a cuda_vmm buffer's once they are copied to the staging buffer).
    void read_attachment(const BufferInfo& info, std::uint64_t offset, std::uint64_t length, bool cut_short,
                         const Reply& reply);
    void send_staged(const BufferInfo& info, std::uint64_t offset, std::uint64_t length, nlohmann::json answer,
                     std::uint64_t id, std::uint64_t start, const Reply& reply);
    // A step of the daemon's own (a transfer, an fd hand-over, a release) scheduled as a task over `footprint`:
    // `step` runs once the tasks it must follow finished, however they ended (a tolerant task of the scheduler: a
    // failed one fails no step), with the step's id and a reply that answers at most once, and
    // reports its result with on_result(id, ...); a step the daemon stops before running is answered WORKER_DIED
    // with `stopped`. Throws RequestError(WORKER_DIED) while the daemon stops.
    void schedule_step(const std::string& name, std::vector<TensorArg> footprint, const Reply& reply,
                       std::string stopped, std::function<void(std::uint64_t id, const Reply& once)> step);
    // buffer.release: refused to every new use at once, released (and answered) once earlier tasks over the
    // buffer finished.
    void handle_buffer_release(const nlohmann::json& request, const Reply& reply, const Peer& peer);
    // buffer.fd (service_fds.cpp): answered, with the fds attached, once earlier tasks over the buffer finished.
    void handle_buffer_fd(const nlohmann::json& request, const Reply& reply, const Peer& peer);
    void handle_module_load(const nlohmann::json& request, const Reply& reply);
    BufferDescriptor resolve_buffer(const std::string& id, const std::string& where) const;
    // Throws BAD_REQUEST for a buffer of a remote node's host, of which this host has no fd.
    void require_local_bytes(const BufferInfo& info, const char* op) const;
    BufferInfo live_buffer(const nlohmann::json& request) const;

    // tasks (service_tasks.cpp)
    // `raw`: the tasks the fast path read, moved from; when null they are parsed from `request`.
    void handle_run(const nlohmann::json& request, RawRun* raw, Reply reply, bool single, const Peer& peer);
    void handle_wait(const nlohmann::json& request, Reply reply);
    nlohmann::json handle_cancel(const nlohmann::json& request, const Peer& peer);
    // A task's result, from any thread: recorded at once under mu_.
    void on_result(std::uint64_t id, const TaskResult& result);
    // A dispatched task's result, from a supervisor completion thread: queued for the io thread, which
    // records every queued result under one lock (drain_results). One post per batch, and the Service's
    // state is touched by one thread on the hot path.
    void post_result(std::uint64_t id, TaskResult result);
    void drain_results();
    // A ready batch: requests for the supervisor and the daemon's own steps (buffer transfers).
    // The steps the daemon runs itself (buffer transfers) that became ready; tasks for workers are submitted to
    // the supervisor as they become ready, under mu_, so that a task ordered after another on its worker is
    // queued after it and before the Service learns how it ended (Supervisor::forget_failure).
    struct ReadyWork {
        std::vector<std::function<void()>> local;
    };
    void dispatch_ready_locked(ReadyWork& out);
    void record_result_locked(std::uint64_t id, const TaskResult& result, ReadyWork& out);
    void dispatch(ReadyWork work);
    void run_transfer(const BufferInfo& info, std::uint64_t offset, std::vector<std::byte> data, std::uint64_t length,
                      bool write, std::uint64_t id, const Reply& reply);
    std::vector<std::function<void()>> finish_locked(std::uint64_t id, const std::string& state, ErrorCode code,
                                                     const std::string& message, std::uint64_t start_ns,
                                                     std::uint64_t end_ns);

    void serve();
    static constexpr std::chrono::microseconds SERVE_SPIN{200};
    // The io thread polls in a loop of syscalls; it yields more often than a mailbox spin, so that a client or
    // a worker woken onto its CPU waits a few microseconds at most.
    static constexpr std::uint32_t SERVE_YIELD_EVERY = 32;
    void begin_stop();
    void finish_when_closed(std::chrono::steady_clock::time_point deadline);
    static constexpr std::chrono::seconds CLOSE_GRACE{2};
    void start_metrics_listener();
    std::string render_metrics() const;
    void schedule_watchdog();
    // Called on any change of the worker tree: STATUS= follows it (coalesced on the io thread).
    void tree_changed();
    void publish_status();

    config::Config config_;
    std::shared_ptr<spdlog::logger> log_;
    AccessPolicy access_;
    Supervisor supervisor_;
    // Requests that wait on workers without a task of their own (device buffer creation) or reserve much
    // memory (shm buffers from SLOW_CREATE_BYTES up, service_handlers.cpp) run here, so that the control
    // thread keeps serving every other client meanwhile. Created after the supervisor, whose constructor
    // forks the zygote from a single-threaded process.
    boost::asio::thread_pool slow_{1};
    // The threads that share a large graph's checks with the control thread; after the supervisor too.
    CheckerPool checkers_;
    // A graph's first tasks are dispatched while the rest are queued (service_tasks.cpp) where there are CPUs to
    // spare, as for checker threads: 4 CPUs or more, or CANOPY_CHECK_THREADS of 2 or more.
    const bool early_dispatch_ = checkers_.helpers() > 0;
    boost::asio::io_context io_;
    ControlServer control_;
    Metrics metrics_;
    std::chrono::steady_clock::time_point started_;

    mutable std::mutex mu_;
    std::condition_variable drained_;
    scheduler::Scheduler scheduler_;
    TaskBook book_;
    std::uint64_t next_task_ = 1;
    bool stopping_ = false;

    std::mutex results_mu_; // guards results_; taken alone
    std::vector<std::pair<std::uint64_t, TaskResult>> results_;

    std::unique_ptr<MetricsListener> metrics_listener_;
    std::unique_ptr<RemoteServer> remote_server_; // with a serve section: the link to a remote L4
    std::unique_ptr<boost::asio::steady_timer> watchdog_;
    boost::asio::signal_set signals_;
    std::thread stopper_;
    std::atomic<bool> stop_requested_{false};
    std::atomic<bool> status_dirty_{false};
    std::atomic<bool> ready_{false};
    std::atomic<int> exit_code_{0}; // non-zero once the tree could not heal
    // False from the start of ~Service: callbacks that can outlive the service's state (an attachment's `sent`,
    // run when the last reference to it drops) do nothing then.
    std::shared_ptr<std::atomic<bool>> alive_ = std::make_shared<std::atomic<bool>>(true);
};

// One line for systemd's STATUS=: "9/9 workers up", or "8/9 workers up; /node1/chip0 dead: killed by signal 9
// (SIGKILL)" naming the first few workers that are not running.
std::string describe_tree(const std::vector<WorkerStatus>& workers);

// The bytes of a request's "data" member (base64, RFC 4648). Throws RequestError(BAD_REQUEST) naming the problem
// ("data: base64: length 3 is not a multiple of 4").
std::vector<std::byte> decode_data(const std::string& text);

// The supervisor options of a config with the state dir it names.
SupervisorOptions service_options(const config::Config& config);

} // namespace canopy::daemon
