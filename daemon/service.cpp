#include "daemon/service.h"

#include "daemon/notify.h"
#include "daemon/remote_credentials.h"
#include "ipc/futex.h"

#include <algorithm>
#include <sched.h>
#include <unistd.h>

namespace canopy::daemon {

namespace asio = boost::asio;

SupervisorOptions service_options(const config::Config& config) {
    return from_config(config, config.state_dir);
}

namespace {

// Admins may use the socket whether or not the allow lists name them.
std::vector<std::uint32_t> allowed_ids(std::vector<std::uint32_t> allowed, const std::vector<std::uint32_t>& admins) {
    for (const std::uint32_t id : admins) {
        if (std::find(allowed.begin(), allowed.end(), id) == allowed.end()) {
            allowed.push_back(id);
        }
    }
    return allowed;
}

ControlLimits control_limits(const config::ControlConfig& control) {
    ControlLimits limits;
    limits.max_sessions = control.max_connections;
    limits.frame_timeout = control.frame_timeout;
    limits.idle_timeout = control.idle_timeout;
    limits.max_queued_reply_bytes = control.max_queued_reply_bytes;
    limits.max_attachment_bytes = control.max_attachment_bytes;
    return limits;
}

} // namespace

Service::Service(const config::Config& config, std::shared_ptr<spdlog::logger> log)
    : config_(config), log_(std::move(log)), access_(::getuid(), config.control.admin_uids, config.control.admin_gids),
      supervisor_(service_options(config)),
      control_(
          io_,
          ControlOptions{config.control.socket, allowed_ids(config.control.allow_uids, config.control.admin_uids),
                         allowed_ids(config.control.allow_gids, config.control.admin_gids),
                         config.control.max_frame_bytes, control_limits(config.control)},
          [this](const nlohmann::json& request, RawRun* run, const Peer& peer, Reply reply, Attachment attachment) {
              handle(request, run, peer, std::move(reply), attachment);
          },
          log_),
      book_(config.control.task_history), signals_(io_, SIGTERM, SIGINT) {
    supervisor_.set_on_change([this] { tree_changed(); });
    supervisor_.set_on_fatal([this](const std::string& why) {
        log_->critical("canopyd exits with status 1 so that it can be restarted afresh: {}", why);
        exit_code_ = 1;
        request_stop();
    });
}

std::string describe_tree(const std::vector<WorkerStatus>& workers) {
    constexpr std::size_t NAMED = 3;
    std::size_t up = 0;
    std::string down;
    std::size_t named = 0;
    for (const auto& w : workers) {
        if (w.state == WorkerState::RUNNING) {
            ++up;
            continue;
        }
        if (named++ < NAMED) {
            down += "; " + w.path + " " + to_string(w.state) + (w.last_exit.empty() ? "" : ": " + w.last_exit);
        }
    }
    if (named > NAMED) {
        down += "; " + std::to_string(named - NAMED) + " more not running";
    }
    return std::to_string(up) + "/" + std::to_string(workers.size()) + " workers up" + down;
}

void Service::tree_changed() {
    if (!status_dirty_.exchange(true)) {
        asio::post(io_, [this] { publish_status(); });
    }
}

void Service::publish_status() {
    status_dirty_ = false;
    {
        std::lock_guard lock(mu_);
        if (!ready_ || stopping_) {
            return; // STATUS= says "stopping" from now on
        }
    }
    notify_status(describe_tree(supervisor_.status()));
}

Service::~Service() {
    *alive_ = false;
    // Slow requests finish (the supervisor has stopped, so they fail fast) while io_ can still take replies.
    slow_.join();
    if (stopper_.joinable()) {
        stopper_.join();
    }
}

int Service::run() {
    started_ = std::chrono::steady_clock::now();
    if (config_.serve) {
        RemoteServer::preflight(*config_.serve); // before the tree starts: a node that cannot serve stops at once
    }
    if (std::any_of(config_.node.nodes.begin(), config_.node.nodes.end(),
                    [](const config::NodeConfig& node) { return node.remote.has_value(); })) {
        // The supervisor sends remote nodes' tasks on gRPC streams of this process (daemon/remote_tasks.h).
        route_grpc_log(log_);
    }
    log_->info("zygote {} forked; starting {} children of {} (level {})", supervisor_.zygote_pid(),
               supervisor_.options().children.size(), config_.node.name, config_.node.level);
    supervisor_.start();
    control_.start();
    start_metrics_listener();
    if (config_.serve) {
        remote_server_ = std::make_unique<RemoteServer>(supervisor_, *config_.serve, config_.node.name, log_);
    }
    signals_.async_wait([this](const boost::system::error_code& ec, int sig) {
        if (!ec) {
            log_->info("received SIG{}, stopping", sigabbrev_np(sig) ? sigabbrev_np(sig) : "?");
            begin_stop();
        }
    });
    schedule_watchdog();
    const auto workers = supervisor_.status();
    for (const auto& w : workers) {
        log_->info("{} {} pid {} {}", w.path, w.kind, w.pid, to_string(w.state));
    }
    const std::string ready = describe_tree(workers) + "; listening on " + config_.control.socket.string();
    notify_ready(ready);
    ready_ = true;
    log_->info("ready: {}", ready);
    if (stop_requested_) {
        begin_stop();
    }
    serve();
    if (stopper_.joinable()) {
        stopper_.join();
    }
    log_->info("stopped");
    return exit_code_;
}

// The io thread's loop: it runs ready handlers and, for SERVE_SPIN after the last one, polls for more instead
// of sleeping in epoll_wait. A client's next request, and a result a completion thread posts, that arrive
// within that window are then picked up without waking this thread (waking a sleeping thread on an idle CPU
// costs 15-30 us on a small virtual machine, more than the rest of a no-op task's round trip). An idle daemon
// sleeps. The children's mailboxes are not polled here: each has one owner, its completion thread.
void Service::serve() {
    auto last_work = std::chrono::steady_clock::now();
    std::uint32_t spins = 0;
    while (!io_.stopped()) {
        if (io_.poll() > 0) {
            last_work = std::chrono::steady_clock::now();
            continue;
        }
        if (io_.stopped()) {
            break;
        }
        if (std::chrono::steady_clock::now() - last_work < SERVE_SPIN) {
            ipc::spin_pause(spins++, SERVE_YIELD_EVERY);
            continue;
        }
        if (io_.run_one() > 0) {
            last_work = std::chrono::steady_clock::now();
        }
    }
}

void Service::request_stop() {
    stop_requested_ = true;
    asio::post(io_, [this] { begin_stop(); });
}

// Runs on the io thread. The drain and the supervisor's stop block, so they run on a stopper thread that
// ends the io_context when everything is down.
void Service::begin_stop() {
    {
        std::lock_guard lock(mu_);
        if (stopping_) {
            return;
        }
        stopping_ = true;
    }
    notify_stopping();
    control_.stop_accepting(); // connections stay open: clients waiting on tasks get their replies
    signals_.cancel();
    if (watchdog_) {
        watchdog_->cancel();
    }
    if (metrics_listener_) {
        metrics_listener_->stop();
    }
    // The io thread must keep running through the drain: the results that end it reach the book as handlers
    // posted to io_ (drain_results), and with the acceptor closed and no client connected io_ has nothing else
    // to do, so without this guard it would return and leave the drain to its deadline.
    stopper_ = std::thread([this, work = asio::make_work_guard(io_)]() mutable {
        const auto deadline = std::chrono::steady_clock::now() + config_.supervision.drain_timeout;
        std::vector<std::function<void()>> callbacks;
        {
            std::unique_lock lock(mu_);
            drained_.wait_until(lock, deadline, [&] { return book_.unfinished() == 0; });
            for (const auto id : book_.unfinished_ids()) {
                std::vector<scheduler::FailedTask> dependents;
                if (scheduler_.state(id)) {
                    scheduler_.fail(id, ErrorCode::WORKER_DIED, dependents);
                }
                auto cbs = book_.finish(id, "failed", ErrorCode::WORKER_DIED,
                                        "the daemon stopped before the task finished", 0, 0);
                callbacks.insert(callbacks.end(), cbs.begin(), cbs.end());
            }
        }
        for (auto& cb : callbacks) {
            cb();
        }
        // The remote L4's session ends before the drain's end: its calls in flight get their results first.
        if (remote_server_) {
            remote_server_->stop();
        }
        // One drain: the supervisor's own ends at the same deadline, then its children get STOP_GRACE to exit.
        supervisor_.stop(deadline);
        // What the supervisor failed as it stopped has answered the remote L4's calls; the server's threads end.
        if (remote_server_) {
            remote_server_->close();
        }
        // Runs after the replies posted above: each connection closes once they are written. A client
        // that never reads its reply is cut off after CLOSE_GRACE.
        asio::post(io_, [this] {
            control_.stop();
            finish_when_closed(std::chrono::steady_clock::now() + CLOSE_GRACE);
        });
        work.reset(); // the handler just posted is io_'s work from here on
    });
}

void Service::finish_when_closed(std::chrono::steady_clock::time_point deadline) {
    if (control_.connections() == 0 || std::chrono::steady_clock::now() >= deadline) {
        io_.stop();
        return;
    }
    auto timer = std::make_shared<asio::steady_timer>(io_, std::chrono::milliseconds(10));
    timer->async_wait([this, timer, deadline](const boost::system::error_code&) { finish_when_closed(deadline); });
}

void Service::schedule_watchdog() {
    const auto interval = watchdog_ping_interval();
    if (!interval) {
        return;
    }
    if (!watchdog_) {
        watchdog_ = std::make_unique<asio::steady_timer>(io_);
    }
    notify_watchdog();
    watchdog_->expires_after(*interval);
    watchdog_->async_wait([this](const boost::system::error_code& ec) {
        if (!ec) {
            schedule_watchdog();
        }
    });
}

std::string Service::render_metrics() const {
    return metrics_.render(supervisor_.status(), supervisor_.buffers(),
                           [this](const CanonicalIdentity& id) { return access_.owner(id); });
}

void Service::start_metrics_listener() {
    if (!config_.metrics.listen) {
        return;
    }
    const auto& listen = *config_.metrics.listen;
    asio::ip::tcp::resolver resolver(io_);
    const auto endpoints = resolver.resolve(listen.host, std::to_string(listen.port));
    metrics_listener_ = std::make_unique<MetricsListener>(
        io_, endpoints.begin()->endpoint(), [this] { return render_metrics(); },
        MetricsLimits{config_.metrics.max_connections, config_.metrics.timeout, config_.metrics.timeout}, log_);
    log_->info("metrics on http://{}/metrics", config::to_string(listen));
    metrics_listener_->start();
}

} // namespace canopy::daemon
