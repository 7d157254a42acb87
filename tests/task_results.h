#pragma once
// TaskResults: the results of tasks submitted to a Supervisor without waiting, collected in submission order
// for a test to check one by one. Header-only; test code only.
//
// Thread safety: next() and get() on the test's thread; the callbacks next() returns run on the supervisor's.

#include "daemon/task.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <future>
#include <memory>
#include <vector>

namespace canopy::testing {

struct TaskResults {
    std::vector<std::future<daemon::TaskResult>> futures;

    // The callback for the next task submitted.
    daemon::TaskCallback next() {
        auto promise = std::make_shared<std::promise<daemon::TaskResult>>();
        futures.push_back(promise->get_future());
        return [promise](daemon::TaskResult r) { promise->set_value(std::move(r)); };
    }
    // The result of the i-th task, waiting up to a minute for it.
    daemon::TaskResult get(std::size_t i) {
        REQUIRE(futures[i].wait_for(std::chrono::seconds(60)) == std::future_status::ready);
        return futures[i].get();
    }
};

} // namespace canopy::testing
