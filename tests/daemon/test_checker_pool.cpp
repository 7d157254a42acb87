// CheckerPool: every index once, chunks on the helper threads for large counts and on the caller alone for small
// ones, an escaping exception rethrown only after every chunk ended, and CANOPY_CHECK_THREADS.

#include "daemon/checker_pool.h"
#include "tests/scoped_env.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <mutex>
#include <set>
#include <stdexcept>
#include <string>
#include <thread>
#include <vector>

using canopy::daemon::CheckerPool;
using canopy::testing::ScopedEnv;

TEST_CASE("a checker pool calls f once for every index, on several threads for a large count", "[daemon]") {
    CheckerPool pool(3);
    constexpr std::size_t COUNT = 10 * CheckerPool::MIN_CHUNK + 7;
    std::vector<std::atomic<int>> calls(COUNT);
    std::mutex mu;
    std::set<std::thread::id> threads;
    pool.for_each(COUNT, [&](std::size_t i) {
        calls[i].fetch_add(1);
        std::lock_guard lock(mu);
        threads.insert(std::this_thread::get_id());
    });
    for (std::size_t i = 0; i < COUNT; ++i) {
        INFO("index " << i);
        REQUIRE(calls[i].load() == 1);
    }
    // The caller runs the first chunk and the helpers the other three (one helper may take two).
    CHECK(threads.size() >= 2);
    CHECK(threads.size() <= 4);
    CHECK(threads.count(std::this_thread::get_id()) == 1);
}

TEST_CASE("a checker pool runs a count below two chunks on the calling thread alone, in order", "[daemon]") {
    CheckerPool pool(3);
    std::vector<std::size_t> order;
    std::set<std::thread::id> threads;
    pool.for_each(2 * CheckerPool::MIN_CHUNK - 1, [&](std::size_t i) {
        order.push_back(i); // unsynchronized: one thread only, as the test asserts
        threads.insert(std::this_thread::get_id());
    });
    REQUIRE(order.size() == 2 * CheckerPool::MIN_CHUNK - 1);
    for (std::size_t i = 0; i < order.size(); ++i) {
        REQUIRE(order[i] == i);
    }
    CHECK(threads == std::set<std::thread::id>{std::this_thread::get_id()});
    std::size_t none = 0;
    pool.for_each(0, [&](std::size_t) { ++none; });
    CHECK(none == 0);
}

TEST_CASE("a checker pool without helpers runs everything on the calling thread", "[daemon]") {
    CheckerPool pool(0);
    CHECK(pool.helpers() == 0);
    std::set<std::thread::id> threads;
    std::size_t calls = 0;
    pool.for_each(20 * CheckerPool::MIN_CHUNK, [&](std::size_t) {
        ++calls;
        threads.insert(std::this_thread::get_id());
    });
    CHECK(calls == 20 * CheckerPool::MIN_CHUNK);
    CHECK(threads == std::set<std::thread::id>{std::this_thread::get_id()});
}

TEST_CASE("an exception that escapes f is rethrown after every chunk ended, and the pool keeps working", "[daemon]") {
    CheckerPool pool(3);
    constexpr std::size_t COUNT = 8 * CheckerPool::MIN_CHUNK;
    std::atomic<std::size_t> calls{0};
    const auto throwing = [&](std::size_t i) {
        calls.fetch_add(1);
        if (i == COUNT - 1 || i == COUNT / 2) {
            throw std::runtime_error("index " + std::to_string(i));
        }
    };
    // Four chunks of COUNT / 4: COUNT / 2 is the first index of the third, which stops there; COUNT - 1 is the
    // last of the fourth. The other chunks run to their end, and the third chunk's exception, first by chunk
    // order, is the one rethrown.
    CHECK_THROWS_WITH(pool.for_each(COUNT, throwing), "index " + std::to_string(COUNT / 2));
    CHECK(calls.load() == COUNT - (COUNT / 4 - 1));
    std::atomic<std::size_t> again{0};
    pool.for_each(COUNT, [&](std::size_t) { again.fetch_add(1); });
    CHECK(again.load() == COUNT);
}

TEST_CASE("CANOPY_CHECK_THREADS sets the checker threads, the caller's included, within its bounds", "[daemon]") {
    {
        const ScopedEnv env("CANOPY_CHECK_THREADS", "5");
        CHECK(CheckerPool::default_helpers() == 4);
    }
    {
        const ScopedEnv env("CANOPY_CHECK_THREADS", "1");
        CHECK(CheckerPool::default_helpers() == 0);
    }
    unsigned fallback = 0;
    {
        const ScopedEnv env("CANOPY_CHECK_THREADS", "");
        fallback = CheckerPool::default_helpers();
    }
    CHECK(fallback <= 7);
    for (const char* bad : {"0", "65", "4x", "-3", "many"}) {
        const ScopedEnv env("CANOPY_CHECK_THREADS", bad);
        INFO(bad);
        CHECK(CheckerPool::default_helpers() == fallback);
    }
}
