#pragma once
// A spdlog sink that keeps every line logged through it, for tests that wait for a log line as the sign
// that something happened and count how often it was logged. Safe from any thread.

#include <chrono>
#include <memory>
#include <mutex>
#include <spdlog/logger.h>
#include <spdlog/sinks/base_sink.h>
#include <string>
#include <thread>
#include <vector>

namespace canopy::e2e {

class LineSink : public spdlog::sinks::base_sink<std::mutex> {
public:
    // Lines that contain `part`.
    std::size_t count(const std::string& part) {
        std::lock_guard lock(mutex_);
        std::size_t n = 0;
        for (const auto& line : lines_) {
            if (line.find(part) != std::string::npos) {
                ++n;
            }
        }
        return n;
    }
    // Waits up to `limit` for a line that contains `part`.
    bool wait_for(const std::string& part, std::chrono::milliseconds limit) {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (count(part) == 0) {
            if (std::chrono::steady_clock::now() > deadline) {
                return false;
            }
            std::this_thread::sleep_for(std::chrono::milliseconds(5));
        }
        return true;
    }

protected:
    void sink_it_(const spdlog::details::log_msg& msg) override {
        lines_.emplace_back(msg.payload.data(), msg.payload.size());
    }
    void flush_() override {}

private:
    std::vector<std::string> lines_;
};

// A logger named `name` at debug level writing into a fresh LineSink, returned in `sink`.
inline std::shared_ptr<spdlog::logger> make_line_logger(const std::string& name, std::shared_ptr<LineSink>& sink) {
    sink = std::make_shared<LineSink>();
    auto log = std::make_shared<spdlog::logger>(name, sink);
    log->set_level(spdlog::level::debug);
    return log;
}

} // namespace canopy::e2e
