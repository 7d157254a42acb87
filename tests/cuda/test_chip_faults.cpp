// Faults on cuda chips through a supervisor: a sticky CUDA error (illegal_address) or a crash restarts only
// that chip, the sim chip serves throughout, and buffers keep their contents and stay usable by the restarted
// chip. And with two GPUs, one cuda chip per device, both computing at once.
#include "kernel_cases.h"

#include <catch2/catch.hpp>
#include <future>

using namespace canopy;
using namespace canopy::testing;
using daemon::ChildKind;
using daemon::Supervisor;
using daemon::WorkerState;

namespace {

// After a fault on /chip0: the restarted cuda chip and the sim chip both serve, and buffer `b` (filled with
// 7.0f on all `n` floats before the fault) still holds its contents.
void check_recovered(Supervisor& sup, const BufferDescriptor& b, const ipc::MappedRegion& host, std::uint32_t n) {
    const auto* v = reinterpret_cast<const float*>(host.data());
    for (std::uint32_t i = 0; i < n; ++i) {
        REQUIRE(v[i] == 7.0f);
    }
    REQUIRE(
        sup.run(task("scale", "chip0", {vector_arg(b, DataType::FLOAT32, n, TensorTag::INOUT)}, {ScalarArg::f32(2)}))
            .ok());
    REQUIRE(
        sup.run(task("scale", "chip1", {vector_arg(b, DataType::FLOAT32, n, TensorTag::INOUT)}, {ScalarArg::f32(0.5f)}))
            .ok());
    for (std::uint32_t i = 0; i < n; ++i) {
        REQUIRE(v[i] == 7.0f);
    }
}

} // namespace

TEST_CASE("illegal_address through a supervisor restarts only the cuda chip while buffers and the sim chip carry on",
          "[cuda][chip][gpu][fault]") {
    REQUIRE_GPUS(1);
    TempDir state;
    Supervisor sup(chip_options(state.path, {{ChildKind::CUDA_CHIP, 0}, {ChildKind::SIM_CHIP, 0}}, 0, true));
    sup.start();
    constexpr std::uint32_t n = 100000;
    const auto b = shm_buffer(sup, n * 4);
    auto host = map_shm(b);
    REQUIRE(
        sup.run(task("fill", "chip0", {vector_arg(b, DataType::FLOAT32, n, TensorTag::OUTPUT)}, {ScalarArg::f32(7)}))
            .ok());
    const pid_t before = status_of(sup, "/chip0")->pid;

    const auto r = sup.run(task("illegal_address", "chip0", {}));
    INFO(error_code_name(r.code) << ": " << r.message);
    CHECK((r.code == ErrorCode::KERNEL_FAILED || r.code == ErrorCode::WORKER_DIED));
    CHECK_THAT(r.message, Catch::Contains("CUDA_ERROR_ILLEGAL_ADDRESS"));
    // The sim chip serves while the cuda chip restarts.
    REQUIRE(sup.run(task("iota", "chip1", {vector_arg(b, DataType::INT32, 16, TensorTag::OUTPUT)})).ok());
    REQUIRE(
        sup.run(task("fill", "chip1", {vector_arg(b, DataType::FLOAT32, 16, TensorTag::OUTPUT)}, {ScalarArg::f32(7)}))
            .ok());
    const pid_t after = wait_restarted(sup, "/chip0", before);
    CHECK(after != before);
    const auto chip = status_of(sup, "/chip0");
    CHECK(chip->restarts >= 1);
    CHECK(chip->state == WorkerState::RUNNING);
    CHECK(status_of(sup, "/chip1")->restarts == 0);
    check_recovered(sup, b, host, n);
}

TEST_CASE("abort and segfault on a cuda chip restart it, and it serves its buffers again", "[cuda][chip][gpu][fault]") {
    REQUIRE_GPUS(1);
    TempDir state;
    Supervisor sup(chip_options(state.path, {{ChildKind::CUDA_CHIP, 0}, {ChildKind::SIM_CHIP, 0}}, 0, true));
    sup.start();
    constexpr std::uint32_t n = 4096;
    const auto b = shm_buffer(sup, n * 4);
    auto host = map_shm(b);
    REQUIRE(
        sup.run(task("fill", "chip0", {vector_arg(b, DataType::FLOAT32, n, TensorTag::OUTPUT)}, {ScalarArg::f32(7)}))
            .ok());
    for (const char* kernel : {"abort", "segfault"}) {
        INFO(kernel);
        const pid_t before = status_of(sup, "/chip0")->pid;
        const auto r = sup.run(task(kernel, "chip0", {}));
        CHECK(r.code == ErrorCode::WORKER_DIED);
        CHECK_THAT(r.message, Catch::Contains(std::string("signal ") + (kernel[0] == 'a' ? "6" : "11")));
        wait_restarted(sup, "/chip0", before);
        check_recovered(sup, b, host, n);
    }
}

TEST_CASE("two GPUs: one cuda chip per device, both computing at once, both equal to the sim chip",
          "[cuda][chip][gpu][multi]") {
    REQUIRE_GPUS(2);
    TempDir state;
    Supervisor sup(
        chip_options(state.path, {{ChildKind::CUDA_CHIP, 0}, {ChildKind::CUDA_CHIP, 1}, {ChildKind::SIM_CHIP, 0}}));
    sup.start();
    CHECK(status_of(sup, "/chip0")->device == 0);
    CHECK(status_of(sup, "/chip1")->device == 1);
    std::mt19937_64 rng(11);
    CaseStats stats;
    for (DataType dtype : {DataType::FLOAT32, DataType::BFLOAT16, DataType::INT8}) {
        for (const KernelCase& c : elementwise_cases(dtype)) {
            compare_case(sup, {"/chip0", "/chip1"}, "/chip2", c, rng, stats);
        }
    }
    for (const KernelCase& c : matmul_cases(DataType::FLOAT32)) {
        compare_case(sup, {"/chip0", "/chip1"}, "/chip2", c, rng, stats);
    }
    CHECK(stats.changed == stats.cases);

    // Both at once: long ordered sums on each chip, submitted together.
    constexpr std::uint32_t n = 4'000'000;
    const auto x = shm_buffer(sup, n * 8);
    const auto y = shm_buffer(sup, 3 * 8);
    auto xs = map_shm(x);
    auto ys = map_shm(y);
    fill_random({xs.data(), xs.size()}, DataType::FLOAT64, Values::FINITE, rng);
    std::vector<std::future<daemon::TaskResult>> results;
    std::vector<std::promise<daemon::TaskResult>> promises(3);
    for (std::uint32_t chip = 0; chip < 3; ++chip) {
        results.push_back(promises[chip].get_future());
        sup.submit(task("reduce_sum", "chip" + std::to_string(chip),
                        {vector_arg(x, DataType::FLOAT64, n, TensorTag::INPUT),
                         {make_tensor(y, DataType::FLOAT64, {1}, {}, 8 * chip), TensorTag::OUTPUT}}),
                   [&promises, chip](daemon::TaskResult r) { promises[chip].set_value(std::move(r)); });
    }
    std::vector<daemon::TaskResult> done;
    for (auto& f : results) {
        done.push_back(f.get());
        REQUIRE(done.back().ok());
    }
    const auto* sums = reinterpret_cast<const std::uint64_t*>(ys.data());
    CHECK(sums[0] == sums[2]);
    CHECK(sums[1] == sums[2]);
    // The two GPU runs overlapped in time (each worker stamps its own start and end).
    const bool overlapped = done[0].start_ns < done[1].end_ns && done[1].start_ns < done[0].end_ns;
    CHECK(overlapped);
}
