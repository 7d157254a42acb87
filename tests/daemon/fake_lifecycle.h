#pragma once
// A launcher that forks nothing and a clock that moves only when told: with them a Supervisor's lifecycle
// (spawn, exit, back-off, budget, revival, zygote replacement, timeouts) runs in one process, on the test's
// time. A "child" is the pair of fds the supervisor handed over: it answers READY on its control socket as soon
// as it is started, and the test makes it exit by queueing an EXITED event.

#include "daemon/child_launcher.h"
#include "daemon/clock.h"
#include "ipc/child_message.h"
#include "ipc/fd_passing.h"
#include "ipc/sys_error.h"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <fcntl.h>
#include <functional>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unistd.h>
#include <utility>
#include <vector>

namespace canopy::testing {

using namespace std::chrono_literals;

class FakeClock final : public daemon::Clock {
public:
    time_point now() const noexcept override {
        std::lock_guard lock(mu_);
        return now_;
    }
    void wait_until(ipc::EventCount& events, std::uint32_t seen, time_point until) const noexcept override {
        std::multiset<time_point>::iterator mine;
        {
            std::lock_guard lock(mu_);
            if (now_ >= until) {
                return;
            }
            counts_.insert(&events);
            mine = waiting_.insert(until);
            ++waits_;
        }
        cv_.notify_all();
        events.wait_until(seen, time_point::max()); // advance() bumps `events`
        std::lock_guard lock(mu_);
        waiting_.erase(mine);
    }

    void advance(duration d) {
        std::vector<ipc::EventCount*> counts;
        {
            std::lock_guard lock(mu_);
            now_ += d;
            counts.assign(counts_.begin(), counts_.end());
        }
        for (ipc::EventCount* c : counts) {
            c->bump();
        }
    }
    // How many times a thread started waiting; a thread that re-checked its condition and waits again counts anew.
    std::uint64_t waits() const {
        std::lock_guard lock(mu_);
        return waits_;
    }
    // Whether a thread started waiting after the first `after` waits and is waiting for exactly `until` (real time
    // bounded by `limit`).
    bool sleeps_until(time_point until, std::uint64_t after = 0, std::chrono::milliseconds limit = 10s) const {
        std::unique_lock lock(mu_);
        return cv_.wait_for(lock, limit, [&] { return waits_ > after && waiting_.count(until) > 0; });
    }

private:
    mutable std::mutex mu_;
    mutable std::condition_variable cv_;
    time_point now_{std::chrono::hours(1)};
    mutable std::multiset<time_point> waiting_;
    mutable std::set<ipc::EventCount*> counts_;
    mutable std::uint64_t waits_ = 0;
};

// What the test sees of the children a FakeLauncher "starts"; shared by the launcher and the test.
class FakeChildren {
public:
    struct Child {
        daemon::SpawnRequest request{};
        pid_t pid = -1;
        ipc::UniqueFd mailbox;
        ipc::UniqueFd control;
    };
    static constexpr pid_t FIRST_PID = 400000; // above any pid the supervisor could reach with a real signal

    // A killed child's EXITED event follows its kill at once (its wait status is the signal).
    bool exit_on_kill = true;
    // When not 0, the next start fails in the zygote's fork with this errno (SPAWN_FAILED instead of SPAWNED).
    int fail_next_spawn = 0;
    // When set, runs once, after the next start request is taken and before it returns, on the thread that asked
    // (the supervisor's, inside its spawn), outside this object's lock. Set it before the start it is for.
    std::function<void()> during_next_spawn_request;

    std::uint32_t spawn_request(const daemon::SpawnRequest& request, int mailbox_fd, int control_fd) {
        std::function<void()> during;
        std::uint32_t epoch = 0;
        {
            std::lock_guard lock(mu_);
            epoch = spawn_request_locked(request, mailbox_fd, control_fd);
            during = std::exchange(during_next_spawn_request, nullptr);
        }
        if (during) {
            during();
        }
        return epoch;
    }
    std::uint32_t spawn_request_locked(const daemon::SpawnRequest& request, int mailbox_fd, int control_fd) {
        if (dead_ || stopped_) {
            throw ipc::SysError(EPIPE, "fake zygote: send spawn request");
        }
        Child c;
        c.request = request;
        c.pid = next_pid_++;
        c.mailbox = ipc::UniqueFd(::fcntl(mailbox_fd, F_DUPFD_CLOEXEC, 0));
        c.control = ipc::UniqueFd(::fcntl(control_fd, F_DUPFD_CLOEXEC, 0));
        if (fail_next_spawn != 0) {
            events_.push_back({daemon::ZygoteEventType::SPAWN_FAILED, request.child_index, request.generation, -1,
                               fail_next_spawn, 0});
            fail_next_spawn = 0;
            c.pid = -1;
        } else {
            events_.push_back({daemon::ZygoteEventType::SPAWNED, request.child_index, request.generation, c.pid, 0, 0});
        }
        if (c.pid > 0) {
            send_ready(c);
        }
        children_.push_back(std::move(c));
        cv_.notify_all();
        return epoch_;
    }
    bool next_event(daemon::ZygoteEvent& e) {
        std::unique_lock lock(mu_);
        cv_.wait(lock, [&] { return !events_.empty() || dead_ || stopped_; });
        if (events_.empty()) {
            return false;
        }
        e = events_.front();
        events_.pop_front();
        return true;
    }
    daemon::ZygoteDeath replace() {
        std::lock_guard lock(mu_);
        daemon::ZygoteDeath d;
        d.pid = zygote_pid_;
        d.how = "killed by signal 9 (SIGKILL)";
        if (stopped_ || !standby_) {
            d.successor = -1;
            return d;
        }
        dead_ = false;
        ++epoch_;
        zygote_pid_ = next_pid_++;
        d.successor = zygote_pid_;
        d.epoch = epoch_;
        return d;
    }
    void kill(pid_t pid, int signal) {
        std::lock_guard lock(mu_);
        kills_.emplace_back(pid, signal);
        if (exit_on_kill) {
            push_exit_locked(pid, signal);
        }
        cv_.notify_all();
    }
    void stop() {
        std::lock_guard lock(mu_);
        stopped_ = true;
        cv_.notify_all();
    }

    // --- the test's side
    // The zygote dies; with `standby` false no standby can take its place.
    void kill_zygote(bool standby = true) {
        std::lock_guard lock(mu_);
        dead_ = true;
        standby_ = standby;
        cv_.notify_all();
    }
    pid_t zygote_pid() const {
        std::lock_guard lock(mu_);
        return zygote_pid_;
    }
    // The newest child started for slot `index` exits with wait status `status`.
    void exit(std::uint32_t index, int status) {
        std::lock_guard lock(mu_);
        push_exit_locked(newest_locked(index).pid, status);
        cv_.notify_all();
    }
    // The newest child started for slot `index` reports `text` as its worker tree (a STATUS_REPLY).
    void report_status(std::uint32_t index, const std::string& text) {
        std::lock_guard lock(mu_);
        const Child& c = newest_locked(index);
        ipc::ChildMessage m{};
        m.type = static_cast<std::uint32_t>(ipc::ChildMessageType::STATUS_REPLY);
        m.pid = c.pid;
        std::vector<std::byte> bytes(sizeof m + text.size());
        std::memcpy(bytes.data(), &m, sizeof m);
        std::memcpy(bytes.data() + sizeof m, text.data(), text.size());
        ipc::send_message(c.control.get(), bytes);
    }
    std::size_t spawns(std::uint32_t index) const {
        std::lock_guard lock(mu_);
        return static_cast<std::size_t>(std::count_if(children_.begin(), children_.end(),
                                                      [&](const Child& c) { return c.request.child_index == index; }));
    }
    // Waits (real time, bounded) until slot `index` has been started `n` times.
    bool spawned(std::uint32_t index, std::size_t n, std::chrono::milliseconds limit = 10s) {
        std::unique_lock lock(mu_);
        return cv_.wait_for(lock, limit, [&] {
            return std::count_if(children_.begin(), children_.end(), [&](const Child& c) {
                       return c.request.child_index == index;
                   }) >= static_cast<std::ptrdiff_t>(n);
        });
    }
    pid_t pid(std::uint32_t index) const {
        std::lock_guard lock(mu_);
        return newest_locked(index).pid;
    }
    std::vector<std::pair<pid_t, int>> kills() const {
        std::lock_guard lock(mu_);
        return kills_;
    }
    bool killed(pid_t pid, std::chrono::milliseconds limit = 10s) {
        std::unique_lock lock(mu_);
        return cv_.wait_for(lock, limit, [&] {
            return std::any_of(kills_.begin(), kills_.end(), [&](const auto& k) { return k.first == pid; });
        });
    }

private:
    static void send_ready(const Child& c) {
        ipc::ChildMessage m{};
        m.type = static_cast<std::uint32_t>(ipc::ChildMessageType::READY);
        m.pid = c.pid;
        ipc::send_struct(c.control.get(), m);
    }
    const Child& newest_locked(std::uint32_t index) const {
        const auto it = std::find_if(children_.rbegin(), children_.rend(),
                                     [&](const Child& c) { return c.request.child_index == index; });
        if (it == children_.rend()) {
            throw std::logic_error("no child was started for that slot");
        }
        return *it;
    }
    void push_exit_locked(pid_t pid, int status) {
        events_.push_back({daemon::ZygoteEventType::EXITED, 0, 0, pid, status, 0});
    }

    mutable std::mutex mu_;
    std::condition_variable cv_;
    std::deque<daemon::ZygoteEvent> events_;
    std::deque<Child> children_;
    std::vector<std::pair<pid_t, int>> kills_;
    pid_t next_pid_ = FIRST_PID;
    pid_t zygote_pid_ = FIRST_PID - 1;
    std::uint32_t epoch_ = 0;
    bool dead_ = false;
    bool standby_ = true;
    bool stopped_ = false;
};

class FakeLauncher final : public daemon::ChildLauncher {
public:
    explicit FakeLauncher(std::shared_ptr<FakeChildren> children) : children_(std::move(children)) {}
    pid_t pid() const override { return children_->zygote_pid(); }
    pid_t standby_pid() const override { return -1; }
    std::uint32_t request_spawn(const daemon::SpawnRequest& request, int mailbox_fd, int control_fd) override {
        return children_->spawn_request(request, mailbox_fd, control_fd);
    }
    bool read_event(daemon::ZygoteEvent& event) override { return children_->next_event(event); }
    daemon::ZygoteDeath replace() override { return children_->replace(); }
    void kill(pid_t pid, int signal) override { children_->kill(pid, signal); }
    void stop() override { children_->stop(); }

private:
    std::shared_ptr<FakeChildren> children_;
};

} // namespace canopy::testing
