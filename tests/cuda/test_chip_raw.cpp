// A cuda chip process driven through a raw mailbox: the frames a supervisor would stop (hostile blobs, calls
// that fail the kernel checks, device buffers this piece does not serve, the illegal_address fault) reach the
// worker, which must answer each exactly as a sim chip does, or as its contract says; and frames in orders the
// supervisor also sends (a launch followed by a frame that launches nothing, with no frame after it).
#include "daemon/buffer_registry.h"
#include "raw_chip.h"
#include "worker/cuda/launch_queue.h"

#include <catch2/catch.hpp>
#include <ctime>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

using namespace canopy;
using namespace canopy::testing;

namespace {

TaskArgs args_of(std::vector<TensorArg> tensors, std::vector<ScalarArg> scalars = {}) {
    TaskArgs a;
    a.tensors = std::move(tensors);
    a.scalars = std::move(scalars);
    return a;
}

// The GPU interrupts this machine has taken so far (the "nvidia" lines of /proc/interrupts, every CPU); nullopt
// where the file shows none, as in a container that hides the host's interrupts.
std::optional<std::uint64_t> nvidia_interrupts() {
    std::ifstream in("/proc/interrupts");
    std::optional<std::uint64_t> total;
    for (std::string line; std::getline(in, line);) {
        if (line.size() < 6 || line.compare(line.size() - 6, 6, "nvidia") != 0) {
            continue;
        }
        std::istringstream fields(line.substr(line.find(':') + 1));
        std::uint64_t sum = 0;
        for (std::uint64_t n = 0; fields >> n;) {
            sum += n;
        }
        total = total.value_or(0) + sum;
    }
    return total;
}

// CPU time that process `pid` has used so far, all its threads, in seconds (its CPU-time clock).
double cpu_seconds(pid_t pid) {
    clockid_t clock{};
    REQUIRE(::clock_getcpuclockid(pid, &clock) == 0);
    timespec ts{};
    REQUIRE(::clock_gettime(clock, &ts) == 0);
    return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

CanonicalIdentity forged_identity(std::uint64_t buffer_id) {
    CanonicalIdentity id{};
    id.owner_instance = draw_owner_instance();
    id.buffer_id = buffer_id;
    id.generation = 1;
    return id;
}

} // namespace

TEST_CASE("a raw cuda chip starts, runs a kernel, and its results land in the shm buffer", "[cuda][chip][gpu]") {
    REQUIRE_GPUS(1);
    TempDir state;
    daemon::BufferRegistry registry(state.path / "journal");
    const auto buf = registry.create_posix_shm(4096, Access::READWRITE, "/");
    auto host = map_shm(buf);
    RawChip chip(RawKind::CUDA);
    REQUIRE(chip.ready());
    auto c = chip.run("iota", args_of({view_arg(buf, TensorTag::OUTPUT, DataType::INT32, {1024})}));
    REQUIRE(c.code == ErrorCode::OK);
    const auto* v = reinterpret_cast<const std::int32_t*>(host.data());
    for (int i = 0; i < 1024; ++i) {
        REQUIRE(v[i] == i);
    }
    c = chip.run("@noop", args_of({view_arg(buf, TensorTag::INPUT, DataType::INT32, {1024})}));
    CHECK(c.code == ErrorCode::OK);
}

TEST_CASE("a raw cuda chip answers hostile and ill-fitting frames exactly as a sim chip does", "[cuda][chip][gpu]") {
    REQUIRE_GPUS(1);
    TempDir state;
    daemon::BufferRegistry registry(state.path / "journal");
    const auto a = registry.create_posix_shm(4096, Access::READWRITE, "/");
    const auto b = registry.create_posix_shm(4096, Access::READWRITE, "/");
    const auto ro = registry.create_posix_shm(4096, Access::READ, "/");
    RawChip cuda_chip(RawKind::CUDA);
    RawChip sim_chip(RawKind::SIM);
    REQUIRE(cuda_chip.ready());
    REQUIRE(sim_chip.ready());

    const std::vector<std::pair<std::string, TaskArgs>> calls = {
        {"frobnicate", args_of({})},
        {"copy", args_of({view_arg(a, TensorTag::INPUT, DataType::FLOAT32, {16}),
                          view_arg(b, TensorTag::OUTPUT, DataType::FLOAT32, {12})})},
        {"copy", args_of({view_arg(a, TensorTag::INPUT, DataType::FLOAT32, {16}),
                          view_arg(b, TensorTag::OUTPUT, DataType::INT8, {16})})},
        {"copy", args_of({view_arg(a, TensorTag::OUTPUT, DataType::FLOAT32, {16}),
                          view_arg(b, TensorTag::OUTPUT, DataType::FLOAT32, {16})})},
        {"fill", args_of({view_arg(a, TensorTag::OUTPUT, DataType::FLOAT32, {16})})},
        {"scale", args_of({view_arg(a, TensorTag::OUTPUT, DataType::FLOAT32, {16})}, {ScalarArg::f32(2)})},
        {"reduce_sum", args_of({view_arg(a, TensorTag::INPUT, DataType::INT32, {16}),
                                view_arg(b, TensorTag::OUTPUT, DataType::INT32, {2})})},
        {"matmul", args_of({view_arg(a, TensorTag::INPUT, DataType::INT32, {2, 2}),
                            view_arg(b, TensorTag::INPUT, DataType::INT32, {2, 2}),
                            view_arg(b, TensorTag::OUTPUT, DataType::INT32, {2, 2}, {}, 64)})},
        {"matmul", args_of({view_arg(a, TensorTag::INPUT, DataType::FLOAT32, {3, 4}),
                            view_arg(b, TensorTag::INPUT, DataType::FLOAT32, {5, 6}),
                            view_arg(b, TensorTag::OUTPUT, DataType::FLOAT32, {3, 6}, {}, 512)})},
        {"sleep_ms", args_of({}, {ScalarArg::f64(1)})},
        {"sleep_ms", args_of({}, {ScalarArg::i64(3600001)})},
        {"peer_read", args_of({view_arg(a, TensorTag::INPUT, DataType::FLOAT32, {4}),
                               view_arg(b, TensorTag::OUTPUT, DataType::FLOAT32, {4})},
                              {ScalarArg::i64(0)})},
        {"allgather", args_of({view_arg(a, TensorTag::INPUT, DataType::FLOAT32, {4}),
                               view_arg(b, TensorTag::OUTPUT, DataType::FLOAT32, {4})})},
        {"abort", args_of({})},
        {"illegal_address", args_of({})},
        {"@bogus", args_of({})},
        {"fill", args_of({view_arg(ro, TensorTag::INPUT, DataType::FLOAT32, {16})}, {ScalarArg::f32(1)})},
    };
    for (const auto& [kernel, args] : calls) {
        INFO(kernel);
        const auto c = cuda_chip.run(kernel, args);
        const auto s = sim_chip.run(kernel, args);
        CHECK(c.code != ErrorCode::OK);
        if (kernel == "illegal_address") {
            // Not a sim kernel at all; the cuda chip refuses it as a fault kernel while they are disabled.
            CHECK(c.code == ErrorCode::UNKNOWN_KERNEL);
            CHECK_THAT(c.message, Catch::Contains("illegal_address: fault kernels are disabled"));
            continue;
        }
        CHECK(error_code_name(c.code) == error_code_name(s.code));
        CHECK(c.message == s.message);
    }

    std::mt19937_64 rng(99);
    for (int i = 0; i < 100; ++i) {
        std::vector<std::byte> junk(static_cast<std::size_t>(rng() % 700));
        for (auto& x : junk) {
            x = static_cast<std::byte>(rng());
        }
        const auto c = cuda_chip.run("fill", junk);
        const auto s = sim_chip.run("fill", junk);
        REQUIRE(c.code == ErrorCode::INVALID_TENSOR);
        REQUIRE(c.message == s.message);
    }
    // The chip still serves after all of that.
    const auto ok =
        cuda_chip.run("fill", args_of({view_arg(a, TensorTag::OUTPUT, DataType::FLOAT32, {16})}, {ScalarArg::f32(1)}));
    CHECK(ok.code == ErrorCode::OK);
}

TEST_CASE("a raw cuda chip refuses sim device and fork buffers by name", "[cuda][chip][gpu]") {
    REQUIRE_GPUS(1);
    RawChip chip(RawKind::CUDA);
    REQUIRE(chip.ready());
    const auto sim_vmm = make_vmm_descriptor(Backend::SIM_VMM, forged_identity(8), 1 << 21, Access::READWRITE, 0);
    const auto fork_shm = make_fork_descriptor(Backend::FORK_SHM, forged_identity(9), 4096, Access::READWRITE, 1 << 20);
    for (const auto& [d, name] : {std::pair{sim_vmm, "sim_vmm"}, std::pair{fork_shm, "fork_shm"}}) {
        INFO(name);
        const auto c =
            chip.run("fill", args_of({view_arg(d, TensorTag::OUTPUT, DataType::FLOAT32, {16})}, {ScalarArg::f32(1)}));
        CHECK(c.code == ErrorCode::UNREACHABLE_BUFFER);
        CHECK_THAT(c.message, Catch::StartsWith(std::string("cuda chip /chip0: ") + name +
                                                " buffers cannot be reached from a cuda chip (buffer "));
    }
    // @vmm_create for another device, or of another backend, is refused before anything is allocated.
    const auto other_device =
        make_vmm_descriptor(Backend::CUDA_VMM, forged_identity(10), 1 << 21, Access::READWRITE, 5);
    const auto created =
        chip.run("@vmm_create", args_of({view_arg(other_device, TensorTag::OUTPUT, DataType::UINT8, {1})}));
    CHECK(created.code == ErrorCode::BAD_REQUEST);
    CHECK_THAT(created.message, Catch::Contains("cannot create a cuda_vmm buffer of device 5"));
    const auto sim = chip.run("@vmm_create", args_of({view_arg(sim_vmm, TensorTag::OUTPUT, DataType::UINT8, {1})}));
    CHECK(sim.code == ErrorCode::BAD_REQUEST);
}

TEST_CASE("a raw cuda chip maps a buffer once, drops it on @release, and maps the next generation",
          "[cuda][chip][gpu]") {
    REQUIRE_GPUS(1);
    TempDir state;
    daemon::BufferRegistry registry(state.path / "journal");
    RawChip chip(RawKind::CUDA);
    REQUIRE(chip.ready());
    for (int round = 0; round < 5; ++round) {
        INFO("round " << round);
        const auto buf = registry.create_posix_shm(8192, round % 2 ? Access::READWRITE : Access::WRITE, "/");
        auto host = map_shm(buf);
        for (int use = 0; use < 3; ++use) {
            const auto c = chip.run("fill", args_of({view_arg(buf, TensorTag::OUTPUT, DataType::INT16, {4096})},
                                                    {ScalarArg::i64(round * 10 + use)}));
            REQUIRE(c.code == ErrorCode::OK);
            REQUIRE(reinterpret_cast<const std::int16_t*>(host.data())[4095] == round * 10 + use);
        }
        std::vector<std::byte> id(sizeof(CanonicalIdentity));
        std::memcpy(id.data(), &buf.identity, sizeof buf.identity);
        REQUIRE(chip.run("@release", id).code == ErrorCode::OK);
        REQUIRE(!registry.release(buf.identity));
        // The released generation is stale from now on.
        const auto stale =
            chip.run("fill", args_of({view_arg(buf, TensorTag::OUTPUT, DataType::INT16, {4})}, {ScalarArg::i64(1)}));
        CHECK(stale.code == ErrorCode::STALE_BUFFER);
    }
}

TEST_CASE("a launch on a raw cuda chip is reported when the frame after it is no launch and no frame follows",
          "[cuda][chip][gpu]") {
    REQUIRE_GPUS(1);
    // The frame after the fill: a host kernel, a control frame, a refused kernel. None of them is launched on
    // the stream, and after it the chip's loop waits for a frame that does not come.
    const auto [kernel, scalars, code] = GENERATE(table<std::string, std::vector<ScalarArg>, ErrorCode>({
        {"sleep_ms", {ScalarArg::i64(1)}, ErrorCode::OK},
        {"@noop", {}, ErrorCode::OK},
        {"no_such_kernel", {}, ErrorCode::UNKNOWN_KERNEL},
    }));
    INFO("after the fill: " << kernel);
    TempDir state;
    daemon::BufferRegistry registry(state.path / "journal");
    const auto buf = registry.create_posix_shm(8192, Access::READWRITE, "/");
    auto host = map_shm(buf);
    RawChip chip(RawKind::CUDA);
    REQUIRE(chip.ready());
    // The sleep holds the loop while both later frames land, so the fill's frame is followed by a waiting one.
    chip.submit("sleep_ms", args_of({}, {ScalarArg::i64(300)}));
    chip.submit("fill", args_of({view_arg(buf, TensorTag::OUTPUT, DataType::INT16, {4096})}, {ScalarArg::i64(7)}));
    chip.submit(kernel, args_of({}, scalars));
    const auto slept = chip.result_within(std::chrono::seconds(10));
    REQUIRE(slept.has_value());
    CHECK(slept->code == ErrorCode::OK);
    const auto filled = chip.result_within(std::chrono::seconds(10));
    REQUIRE(filled.has_value());
    CHECK(filled->code == ErrorCode::OK);
    CHECK(reinterpret_cast<const std::int16_t*>(host.data())[4095] == 7);
    const auto last = chip.result_within(std::chrono::seconds(10));
    REQUIRE(last.has_value());
    CHECK(last->code == code);
}

TEST_CASE("a long launch on a raw cuda chip is reported whether a frame comes while the loop waits for it or not",
          "[cuda][chip][gpu]") {
    REQUIRE_GPUS(1);
    // A fill of 1 GiB of host memory over PCIe takes tens of milliseconds: longer than the loop waits for a lone
    // batch itself (LaunchQueue::SPIN_US), so with no frame after it the launch queue's thread takes it over,
    // and with a frame after it the loop hands it over at once to take that frame.
    const bool frame_after = GENERATE(false, true);
    INFO((frame_after ? "a frame comes while the loop waits" : "no frame comes"));
    TempDir state;
    daemon::BufferRegistry registry(state.path / "journal");
    constexpr std::uint64_t BIG = std::uint64_t{1} << 28; // int32 elements
    const auto big = registry.create_posix_shm(BIG * 4, Access::READWRITE, "/");
    const auto small = registry.create_posix_shm(4096, Access::READWRITE, "/");
    auto big_host = map_shm(big);
    auto small_host = map_shm(small);
    RawChip chip(RawKind::CUDA);
    REQUIRE(chip.ready());
    // Registered once, so that the timed fill below is the kernel alone.
    REQUIRE(
        chip.run("fill", args_of({view_arg(big, TensorTag::OUTPUT, DataType::INT32, {1})}, {ScalarArg::i64(0)})).code ==
        ErrorCode::OK);
    chip.submit("fill", args_of({view_arg(big, TensorTag::OUTPUT, DataType::INT32, {BIG})}, {ScalarArg::i64(3)}));
    if (frame_after) {
        std::this_thread::sleep_for(std::chrono::milliseconds(2));
        chip.submit("fill",
                    args_of({view_arg(small, TensorTag::OUTPUT, DataType::INT32, {1024})}, {ScalarArg::i64(5)}));
    }
    const auto filled = chip.result_within(std::chrono::seconds(20));
    REQUIRE(filled.has_value());
    CHECK(filled->code == ErrorCode::OK);
    const auto* values = reinterpret_cast<const std::int32_t*>(big_host.data());
    CHECK(values[0] == 3);
    CHECK(values[BIG / 2] == 3);
    CHECK(values[BIG - 1] == 3);
    if (frame_after) {
        const auto next = chip.result_within(std::chrono::seconds(10));
        REQUIRE(next.has_value());
        CHECK(next->code == ErrorCode::OK);
        CHECK(reinterpret_cast<const std::int32_t*>(small_host.data())[1023] == 5);
    }
    // The chip goes on taking frames either way.
    const auto after =
        chip.run("fill", args_of({view_arg(small, TensorTag::OUTPUT, DataType::INT32, {1024})}, {ScalarArg::i64(7)}));
    CHECK(after.code == ErrorCode::OK);
    CHECK(reinterpret_cast<const std::int32_t*>(small_host.data())[0] == 7);
}

TEST_CASE("short tasks on a raw cuda chip raise no GPU interrupt each", "[cuda][chip][gpu]") {
    REQUIRE_GPUS(1);
    if (!nvidia_interrupts()) {
        CANOPY_SKIP("/proc/interrupts shows no nvidia interrupt here");
    }
    TempDir state;
    daemon::BufferRegistry registry(state.path / "journal");
    const auto buf = registry.create_posix_shm(4096, Access::READWRITE, "/");
    auto host = map_shm(buf);
    RawChip chip(RawKind::CUDA);
    REQUIRE(chip.ready());
    const auto fill = [&](std::int64_t value) {
        return chip.run("fill",
                        args_of({view_arg(buf, TensorTag::OUTPUT, DataType::INT32, {1024})}, {ScalarArg::i64(value)}));
    };
    REQUIRE(fill(0).code == ErrorCode::OK); // registers the buffer
    // One task at a time: each is sealed under an event of its own, which with blocking synchronization would
    // raise one interrupt per task.
    constexpr int TASKS = 500;
    const std::uint64_t before = *nvidia_interrupts();
    for (int i = 1; i <= TASKS; ++i) {
        REQUIRE(fill(i).code == ErrorCode::OK);
    }
    const std::uint64_t raised = *nvidia_interrupts() - before;
    INFO(raised << " GPU interrupts during " << TASKS << " tasks");
    CHECK(raised < TASKS / 10);
    CHECK(reinterpret_cast<const std::int32_t*>(host.data())[1023] == TASKS);
}

TEST_CASE("a raw cuda chip sleeps through a long batch instead of spinning", "[cuda][chip][gpu]") {
    REQUIRE_GPUS(1);
    TempDir state;
    daemon::BufferRegistry registry(state.path / "journal");
    constexpr std::uint64_t BIG = std::uint64_t{1} << 28; // int32 elements: 1 GiB of host memory over PCIe
    const auto big = registry.create_posix_shm(BIG * 4, Access::READWRITE, "/");
    auto big_host = map_shm(big);
    RawChip chip(RawKind::CUDA);
    REQUIRE(chip.ready());
    REQUIRE(
        chip.run("fill", args_of({view_arg(big, TensorTag::OUTPUT, DataType::INT32, {1})}, {ScalarArg::i64(0)})).code ==
        ErrorCode::OK);
    // Twelve fills sent at once: the loop launches them back to back, waits for their batch itself for
    // LaunchQueue::SPIN_US, then hands it to the reporting thread, which sleeps on it at once.
    constexpr int FILLS = 12;
    const double cpu_before = cpu_seconds(chip.pid());
    const auto start = std::chrono::steady_clock::now();
    for (int i = 1; i <= FILLS; ++i) {
        chip.submit("fill", args_of({view_arg(big, TensorTag::OUTPUT, DataType::INT32, {BIG})}, {ScalarArg::i64(i)}));
    }
    for (int i = 1; i <= FILLS; ++i) {
        const auto done = chip.result_within(std::chrono::seconds(60));
        REQUIRE(done.has_value());
        REQUIRE(done->code == ErrorCode::OK);
    }
    const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    const double cpu = cpu_seconds(chip.pid()) - cpu_before;
    INFO("the chip used " << cpu << " s of CPU during " << wall << " s of fills");
    const double spin = static_cast<double>(worker::LaunchQueue::SPIN_US) / 1e6;
    REQUIRE(wall > 4 * spin); // the batch is long
    CHECK(cpu < wall / 2);
    CHECK(cpu < 1.5 * spin); // one thread polled for SPIN_US, not two

    const auto* values = reinterpret_cast<const std::int32_t*>(big_host.data());
    CHECK(values[0] == FILLS);
    CHECK(values[BIG - 1] == FILLS);
}

TEST_CASE("a raw cuda chip reads a read-only buffer through a read-only registration", "[cuda][chip][gpu]") {
    REQUIRE_GPUS(1);
    TempDir state;
    daemon::BufferRegistry registry(state.path / "journal");
    const auto ro = registry.create_posix_shm(4096, Access::READ, "/");
    const auto out = registry.create_posix_shm(4096, Access::READWRITE, "/");
    auto ro_host = map_shm(ro);
    auto out_host = map_shm(out);
    for (int i = 0; i < 1024; ++i) {
        reinterpret_cast<float*>(ro_host.data())[i] = static_cast<float>(i) * 0.5f;
    }
    RawChip chip(RawKind::CUDA);
    REQUIRE(chip.ready());
    const auto c = chip.run("copy", args_of({view_arg(ro, TensorTag::INPUT, DataType::FLOAT32, {1024}),
                                             view_arg(out, TensorTag::OUTPUT, DataType::FLOAT32, {1024})}));
    REQUIRE(c.code == ErrorCode::OK);
    CHECK(std::memcmp(ro_host.data(), out_host.data(), 4096) == 0);
}

TEST_CASE("illegal_address on a raw cuda chip fails its task naming the CUDA error, then the process exits 1",
          "[cuda][chip][gpu][fault]") {
    REQUIRE_GPUS(1);
    RawChip chip(RawKind::CUDA, true);
    REQUIRE(chip.ready());
    CHECK(chip.run("illegal_address", args_of({}, {ScalarArg::i64(1)})).code == ErrorCode::BAD_REQUEST);
    const auto c = chip.run("illegal_address", args_of({}));
    CHECK(c.code == ErrorCode::KERNEL_FAILED);
    // Found by the chip's launch queue, polling or waiting on the event after the launch.
    CHECK_THAT(c.message, Catch::StartsWith("illegal_address: cuEvent"));
    CHECK_THAT(c.message, Catch::Contains(": CUDA_ERROR_ILLEGAL_ADDRESS (an illegal memory access was encountered)"));
    CHECK_THAT(c.message, Catch::Contains("the CUDA context of cuda chip /chip0 is unusable, the chip restarts"));
    const int status = chip.wait_exit();
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == 1);
}
