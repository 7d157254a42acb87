#pragma once
// SerialWorker: one thread that runs the work posted to it, in the order it came. The thread starts with the first
// post, so a worker that is never used costs nothing. stop() runs what is still queued, then joins the thread;
// a post after stop() starts the thread again.
//
// Thread safety: post() from any thread, work included; stop() from one thread at a time, not from the work.

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace canopy::daemon {

class SerialWorker {
public:
    SerialWorker() = default;
    SerialWorker(const SerialWorker&) = delete;
    SerialWorker& operator=(const SerialWorker&) = delete;
    ~SerialWorker() { stop(); }

    void post(std::function<void()> work) {
        std::lock_guard lock(mu_);
        if (!thread_.joinable()) {
            stopping_ = false;
            thread_ = std::thread([this] { loop(); });
        }
        work_.push_back(std::move(work));
        cv_.notify_one();
    }

    // Runs the work still queued, then ends the thread.
    void stop() {
        std::thread ending;
        {
            std::lock_guard lock(mu_);
            stopping_ = true;
            cv_.notify_all();
            ending = std::move(thread_);
        }
        if (ending.joinable()) {
            ending.join();
        }
    }

private:
    void loop() {
        std::unique_lock lock(mu_);
        for (;;) {
            cv_.wait(lock, [&] { return stopping_ || !work_.empty(); });
            if (work_.empty()) {
                return;
            }
            auto work = std::move(work_.front());
            work_.pop_front();
            lock.unlock();
            work();
            lock.lock();
        }
    }

    std::mutex mu_;
    std::condition_variable cv_;
    std::deque<std::function<void()>> work_;
    std::thread thread_;
    bool stopping_ = false;
};

} // namespace canopy::daemon
