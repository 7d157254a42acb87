#include "worker/cuda/launch_queue.h"

#include "ipc/futex.h"

#include <chrono>
#include <cstdio>
#include <cstring>
#include <utility>

namespace canopy::worker {

LaunchQueue::LaunchQueue(const cuda::Driver& driver, const cuda::PrimaryContext& context, std::string who,
                         std::function<void()> on_poison)
    : driver_(driver), context_(context), who_(std::move(who)), on_poison_(std::move(on_poison)), side_(driver),
      wake_(driver, cuda::Event::Wait::SLEEP), ring_(CAPACITY) {
    events_.reserve(CAPACITY);
    free_events_.reserve(CAPACITY);
    for (std::size_t i = 0; i < CAPACITY; ++i) {
        events_.emplace_back(driver_, cuda::Event::Wait::POLL);
        free_events_.push_back(i);
    }
    reporter_ = std::thread([this] { report_loop(); });
}

LaunchQueue::~LaunchQueue() {
    {
        std::lock_guard lock(mu_);
        stop_ = true;
        signals_.fetch_add(1, std::memory_order_release);
    }
    sealed_cv_.notify_all();
    reporter_.join();
    // Tasks never sealed (the chip stopped between a launch and its seal) are not known to have run.
    for (std::size_t i = 0; i < size_; ++i) {
        std::optional<Entry>& entry = ring_[(head_ + i) % CAPACITY];
        entry->done(TaskOutcome{ErrorCode::KERNEL_FAILED,
                                std::string(entry->kernel) + ": " + who_ + " stopped before the task was reported",
                                false});
        entry.reset();
    }
}

void LaunchQueue::add(const FrameDone& done, std::string_view kernel) noexcept {
    std::unique_lock lock(mu_);
    if (poison_ || size_ == CAPACITY) {
        const std::string text = poison_ ? failure_text(kernel) : std::string(kernel) + ": launch queue full";
        lock.unlock();
        done(TaskOutcome{ErrorCode::KERNEL_FAILED, text, false});
        return;
    }
    std::optional<Entry>& entry = ring_[(head_ + size_) % CAPACITY];
    entry.emplace(Entry{done, {}, NO_EVENT});
    const std::size_t n = std::min<std::size_t>(kernel.size(), KERNEL_NAME_BYTES - 1);
    std::memcpy(entry->kernel, kernel.data(), n);
    entry->kernel[n] = '\0';
    ++size_;
}

std::size_t LaunchQueue::unsealed() const noexcept {
    std::lock_guard lock(mu_);
    return size_ - sealed_;
}

std::size_t LaunchQueue::seal_locked(cuda::CuStream stream) noexcept {
    if (size_ == sealed_ || poison_) {
        return NO_EVENT;
    }
    std::optional<Entry>& last = ring_[(head_ + size_ - 1) % CAPACITY];
    // One event per sealed batch, at most one batch per entry: the pool never runs out.
    const std::size_t event = free_events_.back();
    try {
        events_[event].record(stream);
    } catch (const cuda::CudaError& e) {
        poison_locked(e.what(), last->kernel);
        return NO_EVENT;
    }
    free_events_.pop_back();
    last->event = event;
    sealed_ = size_;
    signals_.fetch_add(1, std::memory_order_release);
    return event;
}

void LaunchQueue::seal(cuda::CuStream stream) noexcept {
    {
        std::lock_guard lock(mu_);
        if (seal_locked(stream) == NO_EVENT || !reporter_waiting_) {
            return; // nothing sealed, or the reporting thread is busy or spinning and sees the batch unwoken
        }
    }
    sealed_cv_.notify_one();
}

void LaunchQueue::seal_idle(cuda::CuStream stream, const std::function<bool()>& frame_waiting) noexcept {
    std::size_t event = NO_EVENT;
    std::size_t count = 0;
    {
        std::lock_guard lock(mu_);
        // The reporting thread sleeps only with nothing sealed: then the batch sealed here is the only one.
        if (reporter_waiting_ && sealed_ == 0) {
            event = seal_locked(stream);
            if (event == NO_EVENT) {
                return; // nothing to seal, or the record poisoned the queue (which woke the reporting thread)
            }
            inline_ = true;
            count = size_;
        }
    }
    if (event == NO_EVENT) {
        seal(stream); // the reporting thread is awake, or has batches of its own
        return;
    }
    bool done = false;
    try {
        done = poll(events_[event], &frame_waiting);
    } catch (const cuda::CudaError& e) {
        std::lock_guard lock(mu_);
        inline_ = false;
        poison_locked(e.what(), ring_[(head_ + count - 1) % CAPACITY]->kernel); // wakes the reporting thread
        return;
    }
    if (done) {
        publish(count, false);
    }
    // Given up without a frame waiting: the batch was polled for SPIN_US, which the reporting thread need not
    // repeat. It takes this batch next: nothing else was sealed before it.
    const bool polled_out = !done && !frame_waiting();
    {
        std::lock_guard lock(mu_);
        inline_ = false;
        polled_out_ = polled_out;
        if (done || !reporter_waiting_) {
            return;
        }
    }
    sealed_cv_.notify_one(); // the batch is the reporting thread's now
}

void LaunchQueue::drain(cuda::CuStream stream) noexcept {
    seal(stream);
    std::unique_lock lock(mu_);
    drained_cv_.wait(lock, [&] { return size_ == 0; });
}

std::optional<std::string> LaunchQueue::poisoned() const {
    std::lock_guard lock(mu_);
    return poison_;
}

void LaunchQueue::report_loop() {
    try {
        context_.make_current();
    } catch (const cuda::CudaError& e) {
        std::lock_guard lock(mu_);
        poison_locked(e.what(), "");
    }
    bool poison_reported = false;
    for (;;) {
        std::size_t count = 0;
        std::size_t event = NO_EVENT;
        bool polled = false;
        {
            std::unique_lock lock(mu_);
            const auto work = [&] { return (sealed_ > 0 && !inline_) || poison_ || stop_; };
            if (!work()) {
                // Spin first: a task is usually sealed within microseconds of the last report while work flows,
                // and a condition-variable wake-up costs tens of microseconds.
                const std::uint64_t seen = signals_.load(std::memory_order_acquire);
                lock.unlock();
                idle_spin(seen);
                lock.lock();
                reporter_waiting_ = true;
                sealed_cv_.wait(lock, work);
                reporter_waiting_ = false;
            }
            if (poison_) {
                count = size_;
            } else if (sealed_ == 0) {
                return; // stop_, with nothing sealed left to report
            } else {
                while (ring_[(head_ + count) % CAPACITY]->event == NO_EVENT) {
                    ++count;
                }
                event = ring_[(head_ + count) % CAPACITY]->event;
                ++count;
                polled = std::exchange(polled_out_, false);
            }
        }
        if (event == NO_EVENT) {
            publish(count, true);
            if (!poison_reported) {
                poison_reported = true;
                if (on_poison_) {
                    on_poison_();
                }
            }
            std::unique_lock lock(mu_);
            sealed_cv_.wait(lock, [&] { return stop_ || size_ > 0; });
            if (stop_ && size_ == 0) {
                return;
            }
            continue;
        }
        try {
            wait_for(events_[event], polled);
        } catch (const cuda::CudaError& e) {
            std::lock_guard lock(mu_);
            poison_locked(e.what(), ring_[(head_ + count - 1) % CAPACITY]->kernel);
            continue;
        }
        publish(count, false);
    }
}

void LaunchQueue::idle_spin(std::uint64_t seen) const noexcept {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(IDLE_SPIN_US);
    for (std::uint32_t i = 0; signals_.load(std::memory_order_acquire) == seen; ++i) {
        if (i % 64 == 63 && std::chrono::steady_clock::now() >= until) {
            return;
        }
        ipc::spin_pause(i);
    }
}

bool LaunchQueue::poll(const cuda::Event& event, const std::function<bool()>* give_up) const {
    const auto until = std::chrono::steady_clock::now() + std::chrono::microseconds(SPIN_US);
    for (std::uint32_t i = 0;; ++i) {
        if (event.query()) {
            return true;
        }
        if ((give_up != nullptr && (*give_up)()) || (i % 64 == 63 && std::chrono::steady_clock::now() >= until)) {
            return false;
        }
        ipc::spin_pause(i);
    }
}

void LaunchQueue::wait_for(const cuda::Event& event, bool polled) {
    if (polled ? event.query() : poll(event, nullptr)) {
        return;
    }
    // A long batch: sleep instead of spinning through it. wake_ completes right after `event` does, since the side
    // stream runs nothing else. The batch's own event then gives its outcome, as the context's first error.
    side_.wait(event.get());
    wake_.record(side_.get());
    wake_.synchronize();
    while (!event.query()) {
        ipc::spin_pause(0);
    }
}

void LaunchQueue::publish(std::size_t count, bool failed) {
    std::array<std::optional<FrameDone>, CAPACITY> done;
    std::array<std::string, CAPACITY> text;
    {
        std::lock_guard lock(mu_);
        for (std::size_t i = 0; i < count; ++i) {
            std::optional<Entry>& entry = ring_[head_];
            done[i].emplace(entry->done);
            if (failed) {
                text[i] = failure_text(entry->kernel);
            }
            if (entry->event != NO_EVENT) {
                free_events_.push_back(entry->event);
            }
            entry.reset();
            head_ = (head_ + 1) % CAPACITY;
        }
        size_ -= count;
        sealed_ = sealed_ > count ? sealed_ - count : 0;
    }
    for (std::size_t i = 0; i < count; ++i) {
        (*done[i])(failed ? TaskOutcome{ErrorCode::KERNEL_FAILED, std::move(text[i]), false} : TaskOutcome{});
    }
    drained_cv_.notify_all();
}

void LaunchQueue::poison_locked(const std::string& why, std::string_view kernel) {
    signals_.fetch_add(1, std::memory_order_release);
    if (!poison_) {
        poison_ = why;
        ::dprintf(2, "canopy: %s: %s%s%s; the CUDA context is unusable, the chip restarts\n", who_.c_str(),
                  std::string(kernel).c_str(), kernel.empty() ? "" : ": ", why.c_str());
    }
    sealed_cv_.notify_all();
}

std::string LaunchQueue::failure_text(std::string_view kernel) const {
    return std::string(kernel) + ": " + poison_.value_or("unknown error") + "; the CUDA context of " + who_ +
           " is unusable, the chip restarts";
}

} // namespace canopy::worker
