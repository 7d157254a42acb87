#pragma once
// LaunchQueue: the frames a cuda chip has launched on its stream and not yet reported, in launch order, and the
// thread that reports them as the GPU finishes them.
//
// The chip's frame loop launches a task and add()s its FrameDone; seal() records one event on the stream after
// the tasks added since the last seal, which then complete together when that event does (the loop seals when
// no further frame is waiting, and every MAX_BATCH tasks; with no frame waiting and the reporting thread asleep,
// seal_idle() has the loop wait for the batch and report it itself). The reporting thread waits for the oldest sealed
// event (spinning on cuEventQuery for up to SPIN_US, then sleeping until it completes; a batch the loop handed
// over after polling it that long is slept on at once) and publishes each of its tasks as succeeded; with nothing
// sealed it spins for IDLE_SPIN_US, then sleeps until the next seal. No task is reported before its event completed,
// and none is reported twice.
//
// The batches' events raise no interrupt (cuda::Event::Wait::POLL): at one event per task, the GPU's interrupts
// would land on one CPU at the rate of tasks, and each cost what ran on that CPU about 30 us on the H200 machines
// (docs/gpu.md). Only a wait past SPIN_US sleeps on an interrupt: on an event of blocking synchronization, recorded
// on a side stream that waits for the batch's event.
//
// A failed event query or record is a fault of the context (a kernel's illegal address, say): the queue is then
// poisoned. Every task it holds, and every task added later, is published failed, KERNEL_FAILED with the
// error's text ("scale: cuEventQuery: CUDA_ERROR_ILLEGAL_ADDRESS (...); the CUDA context of cuda chip /chip0 is
// unusable, the chip restarts"), and `on_poison` runs once on the reporting thread (the chip stops taking frames
// and exits, so that its supervisor restarts it). A task that completed on the GPU but whose event had not been
// seen when the fault was found is reported failed too: a success is reported only once it was observed.
//
// Thread safety: add(), seal(), seal_idle() and drain() are called by the frame loop's thread alone; poisoned() from
// any thread. The reporting thread is the queue's own; the destructor drains and stops it.

#include "cuda/context.h"
#include "cuda/event.h"
#include "cuda/stream.h"
#include "protocol/mailbox.h"
#include "worker/worker_loop.h"

#include <array>
#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace canopy::worker {

class LaunchQueue {
public:
    // Tasks sealed under one event at most.
    static constexpr std::size_t MAX_BATCH = 16;
    // How long the reporting thread polls an event before it blocks on it, in microseconds: a blocking wait
    // costs tens of microseconds to wake from, which a task of a millisecond should not pay; past this a task is
    // long enough for that not to matter.
    static constexpr std::uint64_t SPIN_US = 20000;
    // How long the reporting thread, with nothing sealed, spins for the next batch before it blocks.
    static constexpr std::uint64_t IDLE_SPIN_US = 200;

    // Creates the events in `context` (current on the calling thread) and starts the reporting thread.
    // `who` names the chip in messages ("cuda chip /chip0"). Throws CudaError.
    LaunchQueue(const cuda::Driver& driver, const cuda::PrimaryContext& context, std::string who,
                std::function<void()> on_poison);
    ~LaunchQueue();
    LaunchQueue(const LaunchQueue&) = delete;
    LaunchQueue& operator=(const LaunchQueue&) = delete;

    // A task launched on the stream, to be reported once a later seal()'s event completes. At most
    // MAILBOX_FRAMES tasks are held at once (the mailbox has no more frames), so it never allocates.
    void add(const FrameDone& done, std::string_view kernel) noexcept;
    // Tasks added and not yet sealed.
    std::size_t unsealed() const noexcept;
    // Records an event on `stream` after the unsealed tasks; a failure to record poisons the queue. Does nothing
    // when no task is unsealed.
    void seal(cuda::CuStream stream) noexcept;
    // seal() for a frame loop that has no frame to take. While the reporting thread sleeps, the batch this seals
    // is the only one in flight, and the calling thread waits for its event itself, polling it while
    // `frame_waiting()` is false, for up to SPIN_US, then reports it: a lone task then costs no wake-up of the
    // reporting thread (an idle CPU's, 40-100 us on a virtual machine). When a frame comes or the time is up
    // first, or the reporting thread is awake, that thread takes the batch as after seal().
    void seal_idle(cuda::CuStream stream, const std::function<bool()>& frame_waiting) noexcept;
    // Seals, then waits until every task added has been reported.
    void drain(cuda::CuStream stream) noexcept;
    // The error that poisoned the queue; nullopt while none did.
    std::optional<std::string> poisoned() const;

private:
    struct Entry {
        FrameDone done;
        char kernel[KERNEL_NAME_BYTES];
        std::size_t event = NO_EVENT; // index into events_ for the last task of a sealed batch
    };
    static constexpr std::size_t NO_EVENT = static_cast<std::size_t>(-1);
    static constexpr std::size_t CAPACITY = MAILBOX_FRAMES;

    void report_loop();
    // Returns once signals_ moved from `seen`, or after IDLE_SPIN_US.
    void idle_spin(std::uint64_t seen) const noexcept;
    // Polls `event` for up to SPIN_US, and until `give_up` (when given) returns true; whether it completed.
    // Throws CudaError.
    bool poll(const cuda::Event& event, const std::function<bool()>* give_up) const;
    // Waits for `event`: polls it for SPIN_US (unless `polled`: the frame loop did), then sleeps on wake_ until it
    // completes. Reporting thread only. Throws CudaError.
    void wait_for(const cuda::Event& event, bool polled);
    // Publishes the oldest `count` entries, succeeded, or `failed` with the poison's text. REQUIRES mu_ not held.
    void publish(std::size_t count, bool failed);
    // Records the event after the unsealed tasks and marks them sealed; poisons the queue when the record fails.
    // Returns the event's index, or NO_EVENT when nothing was sealed. REQUIRES mu_ held.
    std::size_t seal_locked(cuda::CuStream stream) noexcept;
    void poison_locked(const std::string& why, std::string_view kernel);
    std::string failure_text(std::string_view kernel) const;

    const cuda::Driver& driver_;
    const cuda::PrimaryContext& context_;
    std::string who_;
    std::function<void()> on_poison_;
    std::vector<cuda::Event> events_;      // POLL events, one per sealed batch
    std::vector<std::size_t> free_events_; // guarded by mu_
    cuda::Stream side_;                    // the reporting thread's: waits for a batch's event, then records wake_
    cuda::Event wake_;                     // SLEEP: what a long wait sleeps on

    mutable std::mutex mu_;
    std::condition_variable sealed_cv_;      // a batch was sealed, the queue was poisoned, or it stops
    std::condition_variable drained_cv_;     // the reporting thread published something
    std::vector<std::optional<Entry>> ring_; // CAPACITY entries; [head_, head_ + size_) in use
    std::size_t head_ = 0;
    std::size_t size_ = 0;
    std::size_t sealed_ = 0; // entries of the ring covered by a recorded event, from head_
    std::optional<std::string> poison_;
    bool stop_ = false;
    bool reporter_waiting_ = false; // in sealed_cv_.wait: a seal must notify
    bool inline_ = false;           // seal_idle's caller waits for the sealed batch: not the reporting thread's
    bool polled_out_ = false;       // seal_idle handed over its batch after polling it for SPIN_US: sleep on it
    // Bumped (under mu_) by every seal, poisoning and stop: what the reporting thread spins on while idle.
    std::atomic<std::uint64_t> signals_{0};
    std::thread reporter_;
};

} // namespace canopy::worker
