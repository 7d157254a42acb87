#pragma once
// ControlClient: a benchmark's blocking client of the daemon's control socket (docs/control-protocol.md). A request
// is framed once, before any timing starts, and exchange() returns the reply's body as soon as its last byte is
// read, so that a timing ends there and parsing the reply stays outside it. completed_tasks() reads a `submit` or
// `run` reply afterwards.
//
// Ownership: borrows the connected socket, which must outlive it. Thread safety: one thread at a time.

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <nlohmann/json.hpp>
#include <stdexcept>
#include <string>
#include <unistd.h>

namespace canopy::bench {

// What a `submit` or `run` reply says of its tasks: how many completed (-1 for a reply that is not ok), the
// earliest start_ns and the latest end_ns among them (the worker's CLOCK_MONOTONIC).
struct TaskTimes {
    int count = -1;
    std::uint64_t first_start_ns = 0;
    std::uint64_t last_end_ns = 0;
};

inline TaskTimes completed_tasks(const std::string& reply_body) {
    const nlohmann::json reply = nlohmann::json::parse(reply_body);
    TaskTimes t;
    if (!reply.value("ok", false)) {
        return t;
    }
    nlohmann::json tasks = reply.contains("tasks") ? reply["tasks"] : nlohmann::json::array({reply["task"]});
    t.count = 0;
    t.first_start_ns = std::numeric_limits<std::uint64_t>::max();
    for (const auto& task : tasks) {
        if (task.value("state", "") == "completed") {
            ++t.count;
            t.first_start_ns = std::min(t.first_start_ns, task["start_ns"].get<std::uint64_t>());
            t.last_end_ns = std::max(t.last_end_ns, task["end_ns"].get<std::uint64_t>());
        }
    }
    return t;
}

class ControlClient {
public:
    explicit ControlClient(int fd) : fd_(fd) {}

    // The request as one frame: its length (u32, little-endian), then its JSON text.
    static std::string frame(const nlohmann::json& request) {
        const std::string body = request.dump();
        std::string framed(4, '\0');
        const auto length = static_cast<std::uint32_t>(body.size());
        std::memcpy(framed.data(), &length, 4);
        return framed + body;
    }

    // Sends one framed request and returns the body of its reply. Throws std::runtime_error when the stream breaks.
    std::string exchange(const std::string& framed) const {
        for (std::size_t at = 0; at < framed.size();) {
            const ssize_t n = ::write(fd_, framed.data() + at, framed.size() - at);
            if (n <= 0) {
                throw std::runtime_error("writing a request to the daemon failed");
            }
            at += static_cast<std::size_t>(n);
        }
        std::uint32_t length = 0;
        read_exact(reinterpret_cast<char*>(&length), 4);
        std::string body(length, '\0');
        read_exact(body.data(), length);
        return body;
    }

    // One request; its reply, parsed. Throws std::runtime_error naming the reply when it is not ok.
    nlohmann::json call(const nlohmann::json& request) const {
        nlohmann::json reply = nlohmann::json::parse(exchange(frame(request)));
        if (!reply.value("ok", false)) {
            throw std::runtime_error(request.value("op", "request") + " failed: " + reply.dump());
        }
        return reply;
    }

    // A CUDA_VMM buffer of `bytes` made by cuda chip `chip`; its ID.
    std::string create_vmm(std::uint64_t bytes, const std::string& chip) const {
        return call({{"op", "buffer.create"}, {"bytes", bytes}, {"backend", "vmm"}, {"on", chip}})["buffer"]["id"];
    }

private:
    void read_exact(char* p, std::size_t n) const {
        while (n > 0) {
            const ssize_t got = ::read(fd_, p, n);
            if (got <= 0) {
                throw std::runtime_error("the daemon closed the connection");
            }
            p += got;
            n -= static_cast<std::size_t>(got);
        }
    }

    int fd_;
};

} // namespace canopy::bench
