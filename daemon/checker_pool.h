#pragma once
// Threads that share the checks of a large graph with the control thread (Service::handle_run). for_each(count, f)
// calls f(i) for every i in [0, count) in contiguous chunks: one chunk on the calling thread, the others on the
// pool's threads, and returns when every chunk is done. A count below two chunks, or a pool without helpers (a
// machine of fewer than 4 CPUs), runs on the calling thread alone.
//
// Ownership: owns its threads; the destructor joins them. Construct it after any fork that must see a
// single-threaded process (the Supervisor's zygote). Thread safety: for_each is called by one thread at a time; f
// must be safe to call from several threads at once for different indices.

#include <boost/asio/thread_pool.hpp>
#include <cstddef>
#include <functional>
#include <memory>

namespace canopy::daemon {

class CheckerPool {
public:
    // The fewest indices a chunk holds: below this a thread's wake-up costs more than the checks it takes over.
    static constexpr std::size_t MIN_CHUNK = 128;
    // The most threads CANOPY_CHECK_THREADS may ask for.
    static constexpr unsigned MAX_THREADS = 64;
    // CANOPY_CHECK_THREADS less the caller's own thread, when it is a number from 1 to MAX_THREADS; otherwise half
    // the CPUs this process may run on (ipc::usable_cpus), at most 8, less the caller's own, and 0 below 4 CPUs.
    static unsigned default_helpers() noexcept;

    explicit CheckerPool(unsigned helpers = default_helpers());
    ~CheckerPool();
    CheckerPool(const CheckerPool&) = delete;
    CheckerPool& operator=(const CheckerPool&) = delete;

    unsigned helpers() const noexcept { return helpers_; }

    // Rethrows, after every chunk ended, the first exception f let escape (by chunk order).
    void for_each(std::size_t count, const std::function<void(std::size_t)>& f);

private:
    unsigned helpers_;
    std::unique_ptr<boost::asio::thread_pool> pool_; // null without helpers
};

} // namespace canopy::daemon
