#include "client/future.h"

#include "client/detail/parse.h"
#include "client/detail/wait_pool.h"

#include <algorithm>
#include <stdexcept>

namespace canopy::client {

namespace detail {

WaitResult WaitPool::wait(const std::vector<std::uint64_t>& ids, std::optional<std::chrono::milliseconds> timeout) {
    std::optional<Channel> channel;
    {
        std::lock_guard lock(mu_);
        if (!idle_.empty()) {
            channel.emplace(std::move(idle_.back()));
            idle_.pop_back();
        }
    }
    if (!channel) {
        channel.emplace(Channel::connect(socket_path_));
    }
    nlohmann::json request = {{"op", "wait"}};
    if (ids.size() == 1) {
        request["task_id"] = ids.front();
    } else {
        request["task_ids"] = ids;
    }
    if (timeout) {
        request["timeout_ms"] = std::clamp(*timeout, std::chrono::milliseconds(0), MAX_WAIT_TIMEOUT).count();
    }
    WaitResult result;
    try {
        const nlohmann::json reply = channel->call(request);
        result.tasks = ids.size() == 1
                           ? std::vector<TaskState>{parse_task(object_member(reply, "task", "wait"), "wait")}
                           : parse_tasks(reply, "wait");
        result.timed_out = reply.value("timed_out", false);
    } catch (const Error&) {
        std::lock_guard lock(mu_);
        idle_.push_back(std::move(*channel)); // a refusal leaves the stream whole
        throw;
    }
    std::lock_guard lock(mu_);
    idle_.push_back(std::move(*channel));
    return result;
}

} // namespace detail

namespace {

using Clock = std::chrono::steady_clock;

// Splits a timeout into requests of at most a day each; nullopt is "no timeout".
std::optional<std::chrono::milliseconds> remaining(std::optional<Clock::time_point> deadline) {
    if (!deadline) {
        return std::nullopt;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(*deadline - Clock::now());
    return std::clamp(left, std::chrono::milliseconds(0), detail::MAX_WAIT_TIMEOUT);
}

bool is_secondary(const TaskState& t) {
    return t.error_code == ErrorCode::DEPENDENCY_FAILED || t.error_message.rfind("not run:", 0) == 0;
}

} // namespace

TaskFuture::TaskFuture(std::shared_ptr<detail::WaitPool> pool, TaskState submitted)
    : pool_(std::move(pool)), state_(std::move(submitted)) {}

bool TaskFuture::ready() {
    return wait_for(std::chrono::milliseconds(0)).has_value();
}

const TaskState& TaskFuture::wait() {
    while (!state_.finished()) {
        state_ = pool_->wait({state_.id}, std::nullopt).tasks.at(0);
    }
    return state_;
}

std::optional<TaskState> TaskFuture::wait_for(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!state_.finished()) {
        state_ = pool_->wait({state_.id}, remaining(deadline)).tasks.at(0);
        if (!state_.finished() && Clock::now() >= deadline) {
            return std::nullopt;
        }
    }
    return state_;
}

const TaskState& TaskFuture::get() {
    const TaskState& done = wait();
    if (done.failed()) {
        throw TaskError(done);
    }
    return done;
}

GraphFuture::GraphFuture(std::shared_ptr<detail::WaitPool> pool, std::vector<TaskState> submitted)
    : pool_(std::move(pool)), states_(std::move(submitted)) {}

bool GraphFuture::refresh(std::optional<std::chrono::milliseconds> timeout) {
    std::vector<std::size_t> open;
    for (std::size_t i = 0; i < states_.size(); ++i) {
        if (!states_[i].finished()) {
            open.push_back(i);
        }
    }
    const std::optional<Clock::time_point> deadline =
        timeout ? std::optional(Clock::now() + *timeout) : std::optional<Clock::time_point>();
    for (std::size_t from = 0; from < open.size(); from += detail::MAX_WAIT_IDS) {
        const std::size_t to = std::min(open.size(), from + detail::MAX_WAIT_IDS);
        std::vector<std::uint64_t> ids;
        for (std::size_t k = from; k < to; ++k) {
            ids.push_back(states_[open[k]].id);
        }
        const WaitResult result = pool_->wait(ids, remaining(deadline));
        if (result.tasks.size() != ids.size()) {
            throw ProtocolError("the reply to \"wait\" lists " + std::to_string(result.tasks.size()) + " tasks for " +
                                std::to_string(ids.size()) + " ids");
        }
        for (std::size_t k = from; k < to; ++k) {
            states_[open[k]] = result.tasks[k - from];
        }
        if (result.timed_out) {
            return false;
        }
    }
    return std::all_of(states_.begin(), states_.end(), [](const TaskState& t) { return t.finished(); });
}

bool GraphFuture::ready() {
    return refresh(std::chrono::milliseconds(0));
}

const std::vector<TaskState>& GraphFuture::wait() {
    while (!refresh(std::nullopt)) {
    }
    return states_;
}

std::optional<std::vector<TaskState>> GraphFuture::wait_for(std::chrono::milliseconds timeout) {
    const auto deadline = Clock::now() + timeout;
    while (!refresh(remaining(deadline))) {
        if (Clock::now() >= deadline) {
            return std::nullopt;
        }
    }
    return states_;
}

const std::vector<TaskState>& GraphFuture::get() {
    wait();
    const TaskState* first = nullptr;
    for (const TaskState& t : states_) {
        if (!t.failed()) {
            continue;
        }
        if (!is_secondary(t)) {
            throw TaskError(t);
        }
        first = first ? first : &t;
    }
    if (first) {
        throw TaskError(*first);
    }
    return states_;
}

} // namespace canopy::client
