#include "daemon/checker_pool.h"

#include "ipc/cpus.h"

#include <algorithm>
#include <boost/asio/post.hpp>
#include <cstdlib>
#include <exception>
#include <latch>
#include <vector>

namespace canopy::daemon {

unsigned CheckerPool::default_helpers() noexcept {
    if (const char* text = std::getenv("CANOPY_CHECK_THREADS"); text != nullptr && *text != '\0') {
        char* end = nullptr;
        const unsigned long threads = std::strtoul(text, &end, 10);
        if (*end == '\0' && threads >= 1 && threads <= MAX_THREADS) {
            return static_cast<unsigned>(threads - 1);
        }
    }
    const unsigned cpus = ipc::usable_cpus();
    return cpus < 4 ? 0 : std::min(cpus / 2, 8U) - 1;
}

CheckerPool::CheckerPool(unsigned helpers) : helpers_(helpers) {
    if (helpers_ > 0) {
        pool_ = std::make_unique<boost::asio::thread_pool>(helpers_);
    }
}

CheckerPool::~CheckerPool() {
    if (pool_) {
        pool_->join();
    }
}

void CheckerPool::for_each(std::size_t count, const std::function<void(std::size_t)>& f) {
    const std::size_t chunks = std::min<std::size_t>(helpers_ + 1, count / MIN_CHUNK);
    if (chunks <= 1) {
        for (std::size_t i = 0; i < count; ++i) {
            f(i);
        }
        return;
    }
    std::vector<std::exception_ptr> errors(chunks);
    const auto run_chunk = [&](std::size_t c) {
        try {
            for (std::size_t i = count * c / chunks; i < count * (c + 1) / chunks; ++i) {
                f(i);
            }
        } catch (...) {
            errors[c] = std::current_exception();
        }
    };
    std::latch done(static_cast<std::ptrdiff_t>(chunks - 1));
    for (std::size_t c = 1; c < chunks; ++c) {
        boost::asio::post(*pool_, [&run_chunk, &done, c] {
            run_chunk(c);
            done.count_down();
        });
    }
    run_chunk(0);
    done.wait();
    for (const std::exception_ptr& e : errors) {
        if (e) {
            std::rethrow_exception(e);
        }
    }
}

} // namespace canopy::daemon
