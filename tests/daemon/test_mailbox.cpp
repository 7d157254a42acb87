// A real worker process served through a raw mailbox, with hostile frames written straight into it.
#include "fixture.h"
#include "ipc/child_message.h"
#include "ipc/fd_passing.h"
#include "worker/worker_loop.h"

#include <catch2/catch.hpp>

#include <sys/wait.h>

#include <random>

using namespace canopy;
using namespace canopy::testing;

namespace {

struct RawWorker {
    ipc::MailboxParent mailbox{1};
    ipc::UniqueFd control;
    pid_t pid = -1;

    RawWorker() {
        auto [ours, theirs] = ipc::seqpacket_pair();
        pid = ::fork();
        if (pid == 0) {
            ours.reset();
            worker::WorkerSpec spec;
            spec.kind = kernels::WorkerKind::CHIP;
            spec.path = "/chip0";
            ::_exit(worker::run_worker(spec, ipc::UniqueFd(::dup(mailbox.fd())), std::move(theirs)));
        }
        control = std::move(ours);
        ipc::ChildMessage ready{};
        std::vector<ipc::UniqueFd> fds;
        REQUIRE(ipc::recv_message(control.get(), std::as_writable_bytes(std::span(&ready, 1)), fds) == sizeof ready);
        REQUIRE(ready.type == static_cast<std::uint32_t>(ipc::ChildMessageType::READY));
    }
    ~RawWorker() {
        mailbox.request_shutdown();
        int status = 0;
        ::waitpid(pid, &status, 0);
    }

    ipc::Completion run(std::string_view kernel, std::span<const std::byte> blob) {
        REQUIRE(mailbox.can_submit());
        mailbox.submit({7, kernel, "", {}, blob});
        while (!mailbox.wait(0)) {
        }
        auto c = mailbox.poll();
        REQUIRE(c.has_value());
        return *c;
    }
};

} // namespace

TEST_CASE("hostile mailbox frames fail their task with INVALID_TENSOR and the worker keeps serving", "[daemon][mailbox]") {
    TempDir state;
    daemon::BufferRegistry registry(state.path / "journal");
    const auto buf = registry.create_posix_shm(4, Access::READWRITE, "/");
    RawWorker w;

    std::mt19937_64 rng(42);
    for (int i = 0; i < 200; ++i) {
        std::vector<std::byte> junk(static_cast<std::size_t>(rng() % 700));
        for (auto& b : junk) {
            b = static_cast<std::byte>(rng());
        }
        const auto c = w.run("fill", junk);
        REQUIRE(c.code == ErrorCode::INVALID_TENSOR);
    }

    // The overflow view, written as raw bytes over a valid encoding: shapes=(2147483649,),
    // strides=(2147483648,), float32, over the 4-byte buffer.
    TaskArgs args;
    args.tensors.push_back({make_tensor(buf, DataType::FLOAT32, {1}), TensorTag::OUTPUT});
    args.scalars.push_back(ScalarArg::f32(1.0f));
    auto blob = encode_task_args(args);
    const std::size_t tensor_at = TASK_ARGS_HEADER_BYTES + 8;
    const std::uint32_t shape = 2147483649u;
    const std::uint32_t stride = 2147483648u;
    std::memcpy(blob.data() + tensor_at + offsetof(Tensor, shapes), &shape, 4);
    std::memcpy(blob.data() + tensor_at + offsetof(Tensor, strides), &stride, 4);
    auto c = w.run("fill", blob);
    CHECK(c.code == ErrorCode::INVALID_TENSOR);
    CHECK_THAT(c.message, Catch::Contains("args[0].extent") && Catch::Contains("view extent overflows 64 bits"));

    // Still serving: a valid task succeeds.
    args.scalars[0] = ScalarArg::f32(4.5f);
    c = w.run("fill", encode_task_args(args));
    CHECK(c.code == ErrorCode::OK);
    auto mapped = map_shm(buf);
    float value = 0;
    std::memcpy(&value, mapped.data(), 4);
    CHECK(value == 4.5f);
}

TEST_CASE("a frame whose kernel the worker does not offer fails with UNKNOWN_KERNEL", "[daemon][mailbox]") {
    RawWorker w;
    const auto blob = encode_task_args({});
    auto c = w.run("@bogus", blob);
    CHECK(c.code == ErrorCode::UNKNOWN_KERNEL);
    c = w.run("no_such_kernel", blob);
    CHECK(c.code == ErrorCode::UNKNOWN_KERNEL);
    c = w.run("@noop", blob);
    CHECK(c.code == ErrorCode::OK);
}

TEST_CASE("a fork descriptor whose base lies outside every inherited arena is refused", "[daemon][mailbox]") {
    TempDir state;
    daemon::BufferRegistry registry(state.path / "journal");
    RawWorker w;
    CanonicalIdentity id{};
    id.owner_instance = registry.owner_instance();
    id.buffer_id = 9;
    id.generation = 1;
    const auto forged = make_fork_descriptor(Backend::FORK_SHM, id, 64, Access::READWRITE, 0x10000);
    TaskArgs args;
    args.tensors.push_back({make_tensor(forged, DataType::FLOAT32, {16}), TensorTag::OUTPUT});
    args.scalars.push_back(ScalarArg::f32(1.0f));
    const auto c = w.run("fill", encode_task_args(args));
    CHECK(c.code == ErrorCode::UNREACHABLE_BUFFER);
    CHECK_THAT(c.message, Catch::Contains("outside every arena"));
}
