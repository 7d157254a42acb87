#pragma once
// Helpers for tests of the supervisor's lifecycle: a logger whose lines a test can read, and waiting for a
// condition with a deadline.

#include "daemon/supervisor.h"
#include "tests/proc_support.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <string>
#include <string_view>
#include <sys/types.h>
#include <thread>
#include <vector>

namespace canopy::testing {

// A sink that runs `hold` for each line containing `text` before the sinks after it see the line: a slow journal,
// for tests of what the daemon lets happen before a line of its log is written.
class HoldingSink : public spdlog::sinks::base_sink<std::mutex> {
public:
    HoldingSink(std::string text, std::function<void()> hold) : text_(std::move(text)), hold_(std::move(hold)) {}

protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        if (std::string_view(msg.payload.data(), msg.payload.size()).find(text_) != std::string_view::npos) {
            hold_();
        }
    }
    void flush_() override {}

private:
    std::string text_;
    std::function<void()> hold_;
};

// A logger that keeps its last lines for the test to read. With `held_text`, each line containing it reaches the
// test only once `hold` has returned (HoldingSink).
struct CapturedLog {
    std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(4096);
    std::shared_ptr<spdlog::logger> logger = std::make_shared<spdlog::logger>("daemon", sink);

    CapturedLog() : CapturedLog({}, nullptr) {}
    CapturedLog(const std::string& held_text, std::function<void()> hold) {
        sink->set_pattern("%l %v");
        logger->set_level(spdlog::level::debug);
        if (!held_text.empty()) {
            logger->sinks().insert(logger->sinks().begin(), std::make_shared<HoldingSink>(held_text, std::move(hold)));
        }
    }
    std::vector<std::string> lines() const { return sink->last_formatted(); }
    // Lines that contain every one of `parts`.
    std::vector<std::string> matching(std::initializer_list<std::string> parts) const {
        return matching(std::vector<std::string>(parts));
    }
    std::vector<std::string> matching(const std::vector<std::string>& parts) const {
        std::vector<std::string> out;
        for (const auto& line : lines()) {
            bool all = true;
            for (const auto& p : parts) {
                all = all && line.find(p) != std::string::npos;
            }
            if (all) {
                out.push_back(line);
            }
        }
        return out;
    }
    std::string dump() const {
        std::string out;
        for (const auto& line : lines()) {
            out += line;
        }
        return out;
    }
};

// Polls `done` every 10 ms until it holds or `limit` passes; returns whether it held.
inline bool eventually(const std::function<bool()>& done, std::chrono::milliseconds limit = std::chrono::seconds(10)) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (!done()) {
        if (std::chrono::steady_clock::now() >= deadline) {
            return false;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
}

inline std::optional<daemon::WorkerStatus> worker_status(const daemon::Supervisor& sup, const std::string& path) {
    for (auto& w : sup.status()) {
        if (w.path == path) {
            return w;
        }
    }
    return std::nullopt;
}

inline bool all_running(const daemon::Supervisor& sup) {
    for (const auto& w : sup.status()) {
        if (w.state != daemon::WorkerState::RUNNING || w.pid <= 0) {
            return false;
        }
    }
    return true;
}

} // namespace canopy::testing
