// A cuda chip that cannot start reports FATAL with a message naming the chip and the cause, and the supervisor
// marks it dead without restarting it; the rest of the tree serves on. These run on every machine: without a
// driver, or on a GPU machine with CUDA_VISIBLE_DEVICES="" (no device visible).
#include "chip_fixture.h"
#include "ipc/child_message.h"
#include "ipc/fd_passing.h"
#include "ipc/mailbox_parent.h"
#include "worker/cuda/cuda_chip.h"
#include "worker/cuda/fatbin.h"

#include <catch2/catch.hpp>
#include <csignal>

using namespace canopy;
using namespace canopy::testing;
using daemon::Supervisor;
using daemon::WorkerState;

namespace {

// The text a cuda chip /chip0 on device 0 must report here, with no device visible.
std::vector<std::string> expected_fatal_texts() {
    if (worker::kernel_image().empty()) {
        return {"cuda chip /chip0: built without the CUDA Toolkit, so no GPU kernels are embedded"};
    }
    if (gpu_probe().devices < 0 && gpu_probe().why.find("libcuda.so.1") != std::string::npos) {
        return {"cuda chip /chip0 (device 0): dlopen: cannot load the CUDA driver libcuda.so.1 (",
                "); is the NVIDIA driver installed?"};
    }
    // A driver with CUDA_VISIBLE_DEVICES="": cuInit fails, or it succeeds and counts no device.
    return {};
}

void check_fatal_text(const std::string& text) {
    INFO(text);
    const auto expected = expected_fatal_texts();
    if (expected.empty()) {
        const bool no_device =
            text.find("cuda chip /chip0 (device 0): cuInit: CUDA_ERROR_NO_DEVICE") != std::string::npos ||
            text.find("cuda chip /chip0: device 0 does not exist (0 GPUs visible)") != std::string::npos;
        CHECK(no_device);
        return;
    }
    for (const auto& part : expected) {
        CHECK_THAT(text, Catch::Contains(part));
    }
}

} // namespace

TEST_CASE("a cuda chip without a usable driver is fatal, named, dead without restarts, and the sub serves on",
          "[cuda][chip]") {
    (void)gpu_probe(); // before any thread exists
    TempDir state;
    std::optional<Supervisor> sup;
    {
        ScopedEnv no_devices("CUDA_VISIBLE_DEVICES", "");
        sup.emplace(chip_options(state.path, {{daemon::ChildKind::CUDA_CHIP, 0}}, 1));
    }
    std::string error;
    try {
        sup->start();
    } catch (const std::runtime_error& e) {
        error = e.what();
    }
    INFO(error);
    REQUIRE_THAT(error, Catch::StartsWith("children did not come up: /chip0 is dead (fatal: cuda chip /chip0"));
    check_fatal_text(error);
    CHECK(error.find("/sub0") == std::string::npos);

    // Dead, and it stays dead: no restart is pending. The supervisor schedules a restart when it handles an
    // exit, one back-off later (10 ms here for either child), and restarts come due in time order; so once
    // /sub0, killed after /chip0's death, is running again, a restart of /chip0 would have come first.
    const pid_t sub_pid = status_of(*sup, "/sub0")->pid;
    REQUIRE(sub_pid > 0);
    REQUIRE(::kill(sub_pid, SIGKILL) == 0);
    (void)wait_restarted(*sup, "/sub0", sub_pid);
    const auto chip = status_of(*sup, "/chip0");
    REQUIRE(chip);
    CHECK(chip->state == WorkerState::DEAD);
    CHECK(chip->restarts == 0);
    CHECK(chip->backend == "cuda");
    CHECK_THAT(chip->last_exit, Catch::StartsWith("fatal: cuda chip /chip0"));
    check_fatal_text(chip->last_exit);

    const auto sub = status_of(*sup, "/sub0");
    REQUIRE(sub);
    CHECK(sub->state == WorkerState::RUNNING);
    CHECK(sup->run(task("sleep_ms", "sub0", {}, {ScalarArg::i64(1)})).ok());
    const auto b = shm_buffer(*sup, 64);
    CHECK(sup->run(task("fill", "sub0", {{make_tensor(b, DataType::FLOAT32, {16}), TensorTag::OUTPUT}},
                        {ScalarArg::f32(2.0f)}))
              .ok());
    const auto r = sup->run(
        task("fill", "chip0", {{make_tensor(b, DataType::FLOAT32, {16}), TensorTag::OUTPUT}}, {ScalarArg::f32(2.0f)}));
    CHECK(r.code == ErrorCode::WORKER_DIED);
    CHECK_THAT(r.message, Catch::Contains("dead"));
}

TEST_CASE("run_cuda_chip without a usable driver sends FATAL and exits with the fatal status", "[cuda][chip]") {
    (void)gpu_probe();
    ipc::MailboxParent mailbox(1);
    auto [ours, theirs] = ipc::seqpacket_pair();
    const pid_t pid = ::fork();
    if (pid == 0) {
        ours.reset();
        ::setenv("CUDA_VISIBLE_DEVICES", "", 1);
        worker::WorkerSpec spec;
        spec.kind = kernels::WorkerKind::CHIP;
        spec.path = "/chip0";
        ::_exit(worker::run_cuda_chip(spec, 0, ipc::UniqueFd(::dup(mailbox.fd())), std::move(theirs)));
    }
    theirs.reset();
    ipc::ChildMessage m{};
    std::vector<ipc::UniqueFd> fds;
    const std::size_t n = ipc::recv_message(ours.get(), std::as_writable_bytes(std::span(&m, 1)), fds);
    int status = 0;
    REQUIRE(::waitpid(pid, &status, 0) == pid);
    REQUIRE(n == sizeof m);
    CHECK(m.type == static_cast<std::uint32_t>(ipc::ChildMessageType::FATAL));
    check_fatal_text(std::string(m.text, std::min<std::size_t>(m.text_len, sizeof m.text)));
    REQUIRE(WIFEXITED(status));
    CHECK(WEXITSTATUS(status) == worker::FATAL_EXIT_CODE);
}

TEST_CASE("a cuda chip on a device that does not exist is fatal and names the devices it sees", "[cuda][chip][gpu]") {
    REQUIRE_GPUS(1);
    const int count = gpu_probe().devices;
    TempDir state;
    const auto device = static_cast<std::uint32_t>(count + 2);
    Supervisor sup(
        chip_options(state.path, {{daemon::ChildKind::CUDA_CHIP, device}, {daemon::ChildKind::SIM_CHIP, 0}}));
    std::string error;
    try {
        sup.start();
    } catch (const std::runtime_error& e) {
        error = e.what();
    }
    const std::string expected = "cuda chip /chip0: device " + std::to_string(device) + " does not exist (" +
                                 std::to_string(count) + (count == 1 ? " GPU" : " GPUs") + " visible)";
    CHECK_THAT(error, Catch::Contains(expected));
    CHECK(status_of(sup, "/chip0")->state == WorkerState::DEAD);
    CHECK(status_of(sup, "/chip0")->restarts == 0);
    CHECK(status_of(sup, "/chip1")->state == WorkerState::RUNNING);
}
