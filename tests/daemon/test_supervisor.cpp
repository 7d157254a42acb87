#include "fixture.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <functional>
#include <future>
#include <mutex>
#include <numeric>
#include <thread>

using namespace canopy;
using namespace canopy::testing;
using daemon::BufferRequest;
using daemon::Supervisor;

TEST_CASE("an L3 supervisor runs built-in kernels on sim chips and subs over shared memory", "[daemon]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 2, 2));
    sup.start();
    const auto buf = sup.create_buffer({64 * sizeof(float), Backend::POSIX_SHM, Access::READWRITE, "", {}});
    auto host = map_shm(buf);
    auto* values = reinterpret_cast<float*>(host.data());

    for (const char* worker : {"chip0", "/chip1", "sub0", "/sub1"}) {
        INFO(worker);
        auto r = sup.run(task("iota", worker, {arg(buf, TensorTag::OUTPUT, DataType::FLOAT32, {64})}));
        REQUIRE(r.ok());
        for (int i = 0; i < 64; ++i) {
            REQUIRE(values[i] == static_cast<float>(i));
        }
        // Strided: scale every other element of an 8x8 view's first column block.
        r = sup.run(task("scale", worker, {arg(buf, TensorTag::INOUT, DataType::FLOAT32, {8, 4}, {8, 2})},
                         {ScalarArg::f32(2.0f)}));
        REQUIRE(r.ok());
        for (int row = 0; row < 8; ++row) {
            for (int col = 0; col < 8; ++col) {
                const float base = static_cast<float>(row * 8 + col);
                REQUIRE(values[row * 8 + col] == (col % 2 == 0 ? 2 * base : base));
            }
        }
        std::memset(values, 0, 64 * sizeof(float));
    }
    const auto status = sup.status();
    REQUIRE(status.size() == 4);
    for (const auto& w : status) {
        CHECK(w.state == daemon::WorkerState::RUNNING);
        CHECK(w.pid > 0);
        CHECK(w.tasks_done == 2);
    }
}

TEST_CASE("a task naming an unknown worker or kernel is refused before dispatch", "[daemon]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 1, 1));
    sup.start();
    const auto buf = sup.create_buffer({64, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    auto r = sup.run(task("iota", "chip7", {arg(buf, TensorTag::OUTPUT, DataType::FLOAT32, {16})}));
    CHECK(r.code == ErrorCode::UNKNOWN_WORKER);
    CHECK_THAT(r.message, Catch::Contains("chip7"));
    r = sup.run(task("frobnicate", "chip0", {arg(buf, TensorTag::OUTPUT, DataType::FLOAT32, {16})}));
    CHECK(r.code == ErrorCode::UNKNOWN_KERNEL);
    CHECK_THAT(r.message, Catch::Contains("frobnicate"));
    r = sup.run(task("@release", "chip0", {}));
    CHECK(r.code == ErrorCode::UNKNOWN_KERNEL);
    r = sup.run(task("matmul", "sub0", {}));
    CHECK(r.code == ErrorCode::UNKNOWN_KERNEL);
}

TEST_CASE("access beyond the grant is refused with ACCESS_DENIED", "[daemon]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 1, 0));
    sup.start();
    const auto ro = sup.create_buffer({64, Backend::POSIX_SHM, Access::READ, "", {}});
    auto r = sup.run(task("iota", "chip0", {arg(ro, TensorTag::OUTPUT, DataType::FLOAT32, {16})}));
    CHECK(r.code == ErrorCode::ACCESS_DENIED);
    CHECK_THAT(r.message, Catch::Contains("args[0]") && Catch::Contains("write"));
}

namespace {

// Submits n sleep_ms(0) tasks to chip0; each result records the thread that delivered it.
struct Deliveries {
    std::mutex mu;
    std::vector<std::thread::id> threads;
    std::size_t count() {
        std::lock_guard lock(mu);
        return threads.size();
    }
};

void submit_noops(Supervisor& sup, int n, Deliveries& out) {
    for (int i = 0; i < n; ++i) {
        sup.submit(task("sleep_ms", "chip0", {}, {ScalarArg::i64(0)}), [&out](daemon::TaskResult r) {
            CHECK(r.ok());
            std::lock_guard lock(out.mu);
            out.threads.push_back(std::this_thread::get_id());
        });
    }
}

bool wait_until_count(Deliveries& d, std::size_t n, const std::function<void()>& step) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (d.count() < n && std::chrono::steady_clock::now() < deadline) {
        step();
    }
    return d.count() == n;
}

} // namespace

TEST_CASE("a result published before its completion thread first runs is delivered", "[daemon]") {
    // The completion thread of a restarted chip starts late (a loaded machine can delay a new thread by many
    // milliseconds): the chip is up and has finished its first task before the thread reads the mailbox.
    TempDir state;
    auto options = l3_options(state.path, 1, 0);
    options.fault_kernels = true;
    std::atomic<bool> delay{false};
    options.completion_thread_started = [&delay](const std::string&) {
        if (delay.load()) {
            std::this_thread::sleep_for(std::chrono::milliseconds(500));
        }
    };
    Supervisor sup(options);
    sup.start();
    for (int round = 0; round < 3; ++round) {
        INFO("round " << round);
        delay = true;
        REQUIRE(sup.run(task("abort", "chip0", {})).code == ErrorCode::WORKER_DIED);
        auto done = std::make_shared<std::promise<daemon::TaskResult>>();
        auto result = done->get_future();
        sup.submit(task("sleep_ms", "chip0", {}, {ScalarArg::i64(0)}),
                   [done](daemon::TaskResult r) { done->set_value(std::move(r)); });
        REQUIRE(result.wait_for(std::chrono::seconds(10)) == std::future_status::ready);
        CHECK(result.get().ok());
        delay = false;
    }
}

TEST_CASE("results reach their callbacks on the completion threads and not on the submitter", "[daemon]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 1, 1));
    sup.start();
    Deliveries d;
    submit_noops(sup, 20, d);
    CHECK(wait_until_count(d, 20, [] { std::this_thread::yield(); }));
    for (const auto& id : d.threads) {
        CHECK(id != std::this_thread::get_id());
    }
    sup.stop();
}
