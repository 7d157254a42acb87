#include "fixture.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <functional>
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

TEST_CASE("a caller that polls takes the results, and the completion threads take over when it stops polling",
          "[daemon]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 1, 1));
    sup.start();
    auto submit = [&](std::atomic<int>& done) {
        sup.submit(task("sleep_ms", "chip0", {}, {ScalarArg::i64(0)}), [&](daemon::TaskResult r) {
            CHECK(r.ok());
            ++done;
        });
    };
    auto wait_for = [](const std::atomic<int>& done, int n, const std::function<void()>& poll) {
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        while (done.load() < n && std::chrono::steady_clock::now() < deadline) {
            poll();
        }
        return done.load() == n;
    };

    // While polled, the poller's own calls deliver the results.
    std::atomic<int> polled{0};
    sup.begin_polling();
    std::size_t taken = 0;
    for (int i = 0; i < 20; ++i) {
        submit(polled);
    }
    CHECK(wait_for(polled, 20, [&] { taken += sup.poll_completions(); }));
    CHECK(taken > 0);

    // A poller busy elsewhere (no poll_completions for longer than POLLER_STALE): the completion threads
    // deliver the results themselves.
    std::atomic<int> stalled{0};
    for (int i = 0; i < 5; ++i) {
        submit(stalled);
    }
    CHECK(wait_for(stalled, 5, [] { std::this_thread::sleep_for(std::chrono::milliseconds(1)); }));

    // After end_polling the completion threads deliver at once again.
    sup.end_polling();
    std::atomic<int> after{0};
    for (int i = 0; i < 20; ++i) {
        submit(after);
    }
    CHECK(wait_for(after, 20, [] { std::this_thread::yield(); }));
    sup.stop();
}
