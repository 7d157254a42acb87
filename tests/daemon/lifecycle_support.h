#pragma once
// Helpers for tests of the supervisor's lifecycle: a logger whose lines a test can read, waiting for a
// condition with a deadline, and finding processes by parent and name in /proc.

#include "daemon/supervisor.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <fstream>
#include <functional>
#include <memory>
#include <spdlog/logger.h>
#include <spdlog/sinks/ringbuffer_sink.h>
#include <sstream>
#include <string>
#include <sys/types.h>
#include <thread>
#include <vector>

namespace canopy::testing {

// A logger that keeps its last lines for the test to read.
struct CapturedLog {
    std::shared_ptr<spdlog::sinks::ringbuffer_sink_mt> sink = std::make_shared<spdlog::sinks::ringbuffer_sink_mt>(4096);
    std::shared_ptr<spdlog::logger> logger = std::make_shared<spdlog::logger>("daemon", sink);

    CapturedLog() {
        sink->set_pattern("%l %v");
        logger->set_level(spdlog::level::debug);
    }
    std::vector<std::string> lines() const { return sink->last_formatted(); }
    // Lines that contain every one of `parts`.
    std::vector<std::string> matching(std::initializer_list<std::string> parts) const {
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

// Fields of /proc/PID/stat: the name (comm) and the parent pid; empty name when the process is gone.
struct ProcStat {
    std::string comm;
    char state = '?';
    pid_t ppid = -1;
};

inline ProcStat proc_stat(pid_t pid) {
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ProcStat st;
    const auto open = text.find('(');
    const auto close = text.rfind(')');
    if (open == std::string::npos || close == std::string::npos) {
        return st;
    }
    st.comm = text.substr(open + 1, close - open - 1);
    std::istringstream rest(text.substr(close + 2));
    rest >> st.state >> st.ppid;
    return st;
}

// Whether `pid` is a live process (not gone, not a zombie).
inline bool alive(pid_t pid) {
    const ProcStat st = proc_stat(pid);
    return !st.comm.empty() && st.state != 'Z';
}

// The live children of `parent` named `comm`.
inline std::vector<pid_t> children_named(pid_t parent, const std::string& comm) {
    std::vector<pid_t> out;
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
        const std::string name = e.path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) {
            continue;
        }
        const pid_t pid = std::stoi(name);
        const ProcStat st = proc_stat(pid);
        if (st.ppid == parent && st.comm == comm && st.state != 'Z') {
            out.push_back(pid);
        }
    }
    return out;
}

} // namespace canopy::testing
