// Asynchronous cuda chips: many tasks in flight, reported from events; a sticky error in the middle of them
// fails what was in flight with the error that happened and restarts the chip, and no task reports a success
// that did not happen; a chain of tasks ordered on the chip's stream (TaskRequest::after) gives its final value
// and stops at a failed link; user module kernels launch the same way.
#include "chip_fixture.h"
#include "tests/cuda/user_module.h"
#include "tests/task_results.h"

#include <catch2/catch.hpp>

using namespace canopy;
using namespace canopy::testing;
using daemon::ChildKind;
using daemon::Supervisor;
using daemon::TaskResult;

namespace {

TensorArg one(const BufferDescriptor& d, std::uint32_t i, TensorTag tag) {
    return {make_tensor(d, DataType::FLOAT32, {1}, {}, std::uint64_t{i} * 4), tag};
}

} // namespace

TEST_CASE("a cuda chip keeps many independent tasks in flight and reports each one", "[cuda][chip][gpu][async]") {
    REQUIRE_GPUS(1);
    TempDir state;
    Supervisor sup(chip_options(state.path, {{ChildKind::CUDA_CHIP, 0}}));
    sup.start();
    constexpr std::uint32_t n = 2000;
    const auto b = shm_buffer(sup, n * 4);
    auto host = map_shm(b);
    auto* v = reinterpret_cast<float*>(host.data());
    for (std::uint32_t i = 0; i < n; ++i) {
        v[i] = static_cast<float>(i);
    }
    TaskResults results;
    for (std::uint32_t i = 0; i < n; ++i) {
        sup.submit(task("scale", "chip0", {one(b, i, TensorTag::INOUT)}, {ScalarArg::f32(3)}), results.next());
    }
    for (std::uint32_t i = 0; i < n; ++i) {
        const TaskResult r = results.get(i);
        INFO(i << ": " << error_code_name(r.code) << ": " << r.message);
        REQUIRE(r.ok());
        CHECK(r.end_ns >= r.start_ns);
    }
    for (std::uint32_t i = 0; i < n; ++i) {
        REQUIRE(v[i] == 3.0f * static_cast<float>(i));
    }
}

TEST_CASE("a sticky error among tasks in flight fails them with that error, restarts the chip, and no task "
          "reports a success that did not happen",
          "[cuda][chip][gpu][async][fault]") {
    REQUIRE_GPUS(1);
    TempDir state;
    Supervisor sup(chip_options(state.path, {{ChildKind::CUDA_CHIP, 0}}, 0, true));
    sup.start();
    constexpr std::uint32_t n = 300;
    constexpr std::uint32_t fault_at = 150;
    const auto b = shm_buffer(sup, n * 4);
    auto host = map_shm(b);
    auto* v = reinterpret_cast<float*>(host.data());
    for (std::uint32_t i = 0; i < n; ++i) {
        v[i] = 1.0f;
    }
    const pid_t before = status_of(sup, "/chip0")->pid;
    TaskResults results;
    for (std::uint32_t i = 0; i < n; ++i) {
        if (i == fault_at) {
            sup.submit(task("illegal_address", "chip0", {}), results.next());
        }
        sup.submit(task("scale", "chip0", {one(b, i, TensorTag::INOUT)}, {ScalarArg::f32(2)}), results.next());
    }
    std::size_t in_flight_with_the_error = 0;
    for (std::uint32_t k = 0; k <= n; ++k) {
        const TaskResult r = results.get(k);
        INFO("result " << k << ": " << error_code_name(r.code) << ": " << r.message);
        if (k == fault_at) {
            CHECK(r.code == ErrorCode::KERNEL_FAILED);
            CHECK_THAT(r.message, Catch::Contains("CUDA_ERROR_ILLEGAL_ADDRESS"));
            continue;
        }
        const std::uint32_t i = k < fault_at ? k : k - 1;
        if (r.ok()) {
            // A reported success happened: before the fault, or on the restarted chip (a task still queued in
            // the supervisor when the chip died).
            CHECK(v[i] == 2.0f);
        } else if (r.code == ErrorCode::KERNEL_FAILED) {
            CHECK_THAT(r.message, Catch::Contains("CUDA_ERROR_ILLEGAL_ADDRESS"));
            CHECK_THAT(r.message, Catch::Contains("the chip restarts"));
            in_flight_with_the_error += k > fault_at ? 1 : 0;
        } else {
            CHECK(r.code == ErrorCode::WORKER_DIED); // in the mailbox, never taken by the chip before it exited
        }
    }
    // The chip takes frames while the GPU works: tasks behind the fault were launched, and fail with its error.
    CHECK(in_flight_with_the_error > 0);
    const pid_t after = wait_restarted(sup, "/chip0", before);
    CHECK(after != before);
    REQUIRE(sup.run(task("fill", "chip0", {one(b, 0, TensorTag::OUTPUT)}, {ScalarArg::f32(5)})).ok());
    CHECK(v[0] == 5.0f);
}

TEST_CASE("a chain of tasks ordered on a cuda chip's stream gives its final value", "[cuda][chip][gpu][async]") {
    REQUIRE_GPUS(1);
    TempDir state;
    Supervisor sup(chip_options(state.path, {{ChildKind::CUDA_CHIP, 0}}));
    sup.start();
    constexpr std::uint32_t n = 4096;
    constexpr std::uint64_t links = 1000;
    const auto x = shm_buffer(sup, n * 4);
    const auto y = shm_buffer(sup, n * 4);
    auto xs = map_shm(x);
    auto ys = map_shm(y);
    auto* xv = reinterpret_cast<float*>(xs.data());
    auto* yv = reinterpret_cast<float*>(ys.data());
    for (std::uint32_t i = 0; i < n; ++i) {
        xv[i] = static_cast<float>(i % 7);
        yv[i] = 0.0f;
    }
    TaskResults results;
    // y += x, a thousand times, each link ordered after the one before it: all submitted at once.
    for (std::uint64_t k = 0; k < links; ++k) {
        auto r = task("axpy", "chip0",
                      {TensorArg{make_tensor(x, DataType::FLOAT32, {n}), TensorTag::INPUT},
                       TensorArg{make_tensor(y, DataType::FLOAT32, {n}), TensorTag::INOUT}},
                      {ScalarArg::f32(1)});
        r.id = 900000 + k;
        r.keep_failure = true;
        if (k > 0) {
            r.after = {900000 + k - 1};
        }
        sup.submit(std::move(r), results.next());
    }
    for (std::uint64_t k = 0; k < links; ++k) {
        const TaskResult r = results.get(k);
        INFO(k << ": " << error_code_name(r.code) << ": " << r.message);
        REQUIRE(r.ok());
    }
    for (std::uint32_t i = 0; i < n; ++i) {
        REQUIRE(yv[i] == static_cast<float>(links) * static_cast<float>(i % 7));
    }
}

TEST_CASE("a chain on a cuda chip stops at a failed link: the links after it fail DEPENDENCY_FAILED, unlaunched",
          "[cuda][chip][gpu][async]") {
    REQUIRE_GPUS(1);
    TempDir state;
    Supervisor sup(chip_options(state.path, {{ChildKind::CUDA_CHIP, 0}}));
    sup.start();
    const auto y = shm_buffer(sup, 64);
    auto ys = map_shm(y);
    auto* yv = reinterpret_cast<float*>(ys.data());
    yv[0] = 1.0f;
    const auto doomed = shm_buffer(sup, 64);
    TaskResults results;
    const auto link = [&](std::uint64_t id, std::vector<std::uint64_t> after, const BufferDescriptor& b) {
        auto r = task("scale", "chip0", {one(b, 0, TensorTag::INOUT)}, {ScalarArg::f32(2)});
        r.id = id;
        r.after = std::move(after);
        r.keep_failure = true;
        sup.submit(std::move(r), results.next());
    };
    // A long first link keeps the rest in the mailbox behind the one that fails (its buffer is gone by then).
    auto slow = task("sleep_ms", "chip0", {}, {ScalarArg::i64(300)});
    slow.id = 910000;
    slow.keep_failure = true;
    sup.submit(std::move(slow), results.next());
    link(910001, {}, y);
    link(910002, {910001}, doomed);
    link(910003, {910002}, y);
    link(910004, {910003}, y);
    sup.release_buffer(doomed.identity);
    CHECK(results.get(0).ok());
    CHECK(results.get(1).ok());
    const TaskResult failed = results.get(2);
    REQUIRE_FALSE(failed.ok());
    for (std::size_t k = 3; k <= 4; ++k) {
        const TaskResult r = results.get(k);
        CHECK(r.code == ErrorCode::DEPENDENCY_FAILED);
        CHECK_THAT(r.message, Catch::StartsWith("dependency (task 91000" + std::to_string(k - 1)));
    }
    CHECK(yv[0] == 2.0f); // the first link ran, the last two did not
}

TEST_CASE("user module kernels launch asynchronously, many in flight", "[cuda][chip][gpu][module][async]") {
    REQUIRE_GPUS(1);
    if (user_module_ptx().empty()) {
        CANOPY_SKIP("built without the CUDA Toolkit: no user module PTX");
    }
    TempDir state;
    Supervisor sup(chip_options(state.path, {{ChildKind::CUDA_CHIP, 0}}));
    sup.start();
    sup.load_module("um", user_module_image());
    constexpr std::uint32_t n = 256;
    constexpr std::uint32_t launches = 500;
    const auto x = shm_buffer(sup, n * 4);
    const auto y = shm_buffer(sup, std::uint64_t{n} * launches * 4);
    auto xs = map_shm(x);
    auto ys = map_shm(y);
    auto* xv = reinterpret_cast<float*>(xs.data());
    auto* yv = reinterpret_cast<float*>(ys.data());
    for (std::uint32_t i = 0; i < n; ++i) {
        xv[i] = static_cast<float>(i);
    }
    TaskResults results;
    // Launch j computes y[j] = j * x + y[j] over its own block of y, all submitted before any has finished.
    for (std::uint32_t j = 0; j < launches; ++j) {
        auto r =
            task("um:saxpy", "chip0",
                 {TensorArg{make_tensor(y, DataType::FLOAT32, {n}, {}, std::uint64_t{j} * n * 4), TensorTag::INOUT},
                  TensorArg{make_tensor(x, DataType::FLOAT32, {n}), TensorTag::INPUT}},
                 {ScalarArg::f32(static_cast<float>(j)), ScalarArg::i64(n)});
        r.launch = LaunchConfig{{1, 1, 1}, {n, 1, 1}, 0, 0b1100};
        sup.submit(std::move(r), results.next());
    }
    for (std::uint32_t j = 0; j < launches; ++j) {
        const TaskResult r = results.get(j);
        INFO(j << ": " << error_code_name(r.code) << ": " << r.message);
        REQUIRE(r.ok());
    }
    for (std::uint32_t j = 0; j < launches; ++j) {
        for (std::uint32_t i = 0; i < n; ++i) {
            REQUIRE(yv[std::size_t{j} * n + i] == static_cast<float>(j) * static_cast<float>(i));
        }
    }
}
