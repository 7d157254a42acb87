// A real worker process served through a raw mailbox, with hostile frames written straight into it.
#include "fixture.h"
#include "ipc/child_message.h"
#include "ipc/fd_passing.h"
#include "ipc/futex.h"
#include "worker/worker_loop.h"

#include <catch2/catch.hpp>
#include <random>
#include <sys/wait.h>
#include <thread>

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

TEST_CASE("hostile mailbox frames fail their task with INVALID_TENSOR and the worker keeps serving",
          "[daemon][mailbox]") {
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

namespace {

// The frame of dispatch `id` in a second mapping of the worker's mailbox, as a hostile writer sees it.
TaskFrame* frame_of(ipc::MappedRegion& region, std::uint64_t id) {
    return reinterpret_cast<TaskFrame*>(region.data() + sizeof(MailboxHeader) +
                                        (id % MAILBOX_FRAMES) * sizeof(TaskFrame));
}

} // namespace

TEST_CASE("a result whose echoed trailer does not match what was dispatched poisons the endpoint",
          "[daemon][mailbox]") {
    RawWorker w;
    auto region = ipc::MappedRegion::map_shared(w.mailbox.fd(), MAILBOX_BYTES, true);
    const auto blob = encode_task_args({});
    w.mailbox.submit({7, "@noop", "", {}, blob});
    while (!w.mailbox.wait(0)) {
    }
    frame_of(region, 0)->result.trailer.task_id = 8; // a result for some other task
    CHECK_THROWS_AS(w.mailbox.poll(), ipc::MailboxPoisoned);
}

TEST_CASE("a frame in an unknown state poisons the endpoint", "[daemon][mailbox]") {
    RawWorker w;
    auto region = ipc::MappedRegion::map_shared(w.mailbox.fd(), MAILBOX_BYTES, true);
    const auto blob = encode_task_args({});
    w.mailbox.submit({7, "@noop", "", {}, blob});
    while (!w.mailbox.wait(0)) {
    }
    frame_of(region, 0)->state.store(77);
    try {
        (void)w.mailbox.poll();
        FAIL("poll accepted state 77");
    } catch (const ipc::MailboxPoisoned& e) {
        CHECK_THAT(std::string(e.what()), Catch::Contains("unexpected state 77"));
    }
}

TEST_CASE("a worker refuses a frame written for another incarnation", "[daemon][mailbox]") {
    RawWorker w;
    auto region = ipc::MappedRegion::map_shared(w.mailbox.fd(), MAILBOX_BYTES, true);
    // Dispatch 0 goes through the parent normally; dispatch 1 is forged straight into shared memory and
    // claims generation 9. The worker answers it FAILED with the trailer it found, which a parent
    // expecting its own trailer refuses as poison.
    const auto blob = encode_task_args({});
    CHECK(w.run("@noop", blob).code == ErrorCode::OK);
    TaskFrame* f = frame_of(region, 1);
    std::memcpy(f->kernel, "@noop", 6);
    f->trailer = FrameTrailer{7, 1, 9, 0};
    f->blob_len = static_cast<std::uint32_t>(blob.size());
    std::memcpy(f->blob, blob.data(), blob.size());
    f->state.store(static_cast<std::uint32_t>(FrameState::READY), std::memory_order_release);
    auto* h = reinterpret_cast<MailboxHeader*>(region.data());
    h->submit_seq.fetch_add(1);
    ipc::futex_wake_all(ipc::low_word(&h->submit_seq));
    while (f->state.load() == static_cast<std::uint32_t>(FrameState::READY) ||
           f->state.load() == static_cast<std::uint32_t>(FrameState::RUNNING)) {
    }
    CHECK(f->state.load() == static_cast<std::uint32_t>(FrameState::FAILED));
    CHECK(f->result.error_code == static_cast<std::uint16_t>(ErrorCode::BAD_REQUEST));
    CHECK(f->result.trailer.generation == 9);
}

TEST_CASE("a result waiter blocked on an idle mailbox is woken by the next submit", "[daemon][mailbox]") {
    RawWorker w;
    const ipc::MappedRegion view = ipc::MappedRegion::map_shared(w.mailbox.fd(), MAILBOX_BYTES, false);
    const auto* header = reinterpret_cast<const MailboxHeader*>(view.data());
    const std::uint32_t idle = w.mailbox.activity();
    std::thread waiter([&] { w.mailbox.wait_activity(idle, 0); }); // blocks at once: nothing is in flight
    while (header->parent_sleeping.load() == 0) {
        std::this_thread::yield();
    }
    TaskArgs args;
    args.scalars.push_back(ScalarArg::i64(1000));
    const auto blob = encode_task_args(args);
    const std::uint64_t dispatch = w.mailbox.submit({1, "sleep_ms", "", {}, blob, 0});
    waiter.join();
    // Woken by the submit, not by the result: the task sleeps for a second.
    CHECK(w.mailbox.activity() != idle);
    CHECK_FALSE(w.mailbox.wait(1, 0));
    REQUIRE(w.mailbox.wait(0));
    const auto c = w.mailbox.poll();
    REQUIRE(c);
    CHECK(c->dispatch_id == dispatch);
    CHECK(c->code == ErrorCode::OK);
}

TEST_CASE("a result waiter of a mailbox that does not wake on submit sleeps until the result", "[daemon][mailbox]") {
    RawWorker w;
    w.mailbox.set_wake_waiter_on_submit(false);
    const ipc::MappedRegion view = ipc::MappedRegion::map_shared(w.mailbox.fd(), MAILBOX_BYTES, false);
    const auto* header = reinterpret_cast<const MailboxHeader*>(view.data());
    const std::uint32_t idle = w.mailbox.activity();
    std::thread waiter([&] { w.mailbox.wait_activity(idle, 0); });
    while (header->parent_sleeping.load() == 0) {
        std::this_thread::yield();
    }
    TaskArgs args;
    args.scalars.push_back(ScalarArg::i64(100));
    const auto blob = encode_task_args(args);
    const std::uint64_t dispatch = w.mailbox.submit({1, "sleep_ms", "", {}, blob, 0});
    // The submit left the activity word alone: only the result ends the wait.
    CHECK(w.mailbox.activity() == idle);
    waiter.join();
    CHECK(w.mailbox.activity() != idle);
    REQUIRE(w.mailbox.wait(1, 0));
    const auto c = w.mailbox.poll();
    REQUIRE(c);
    CHECK(c->dispatch_id == dispatch);
    CHECK(c->code == ErrorCode::OK);
}

namespace {

// A parent's mailbox with a hand-played child: frames are taken and finished by writing the shared region.
struct PlayedChild {
    explicit PlayedChild(bool any_order) { parent.set_collect_in_any_order(any_order); }
    ipc::MailboxParent parent{3};
    ipc::MappedRegion view = ipc::MappedRegion::map_shared(parent.fd(), MAILBOX_BYTES, true);
    std::vector<std::byte> blob = encode_task_args(TaskArgs{});

    TaskFrame* frame(std::uint64_t dispatch_id) {
        return reinterpret_cast<TaskFrame*>(view.data() + sizeof(MailboxHeader) +
                                            (dispatch_id % MAILBOX_FRAMES) * sizeof(TaskFrame));
    }
    std::uint64_t submit(std::uint64_t task_id) {
        const std::uint64_t d = parent.submit({task_id, "sleep_ms", "", {}, blob, 0});
        frame(d)->state.store(static_cast<std::uint32_t>(FrameState::RUNNING));
        return d;
    }
    void finish(std::uint64_t dispatch_id, std::uint64_t task_id) {
        TaskFrame* f = frame(dispatch_id);
        f->result.trailer = FrameTrailer{task_id, dispatch_id, 3, 0};
        f->result.error_code = 0;
        f->result.message_len = 0;
        f->state.store(static_cast<std::uint32_t>(FrameState::DONE));
    }
};

} // namespace

TEST_CASE("a mailbox collects results in ring order unless told to take each as it comes", "[daemon][mailbox]") {
    SECTION("in ring order: a result waits behind an older frame still running") {
        PlayedChild child(false);
        child.submit(10);
        child.submit(11);
        child.finish(1, 11);
        CHECK_FALSE(child.parent.poll());
        CHECK_FALSE(child.parent.wait(1, 0));
        child.finish(0, 10);
        CHECK(child.parent.poll()->task_id == 10);
        CHECK(child.parent.poll()->task_id == 11);
        CHECK(child.parent.in_flight() == 0);
    }
    SECTION("in any order: a later result is taken while an older frame runs") {
        PlayedChild child(true);
        child.submit(10);
        child.submit(11);
        child.submit(12);
        child.finish(1, 11);
        CHECK(child.parent.wait(1, 0));
        const auto first = child.parent.poll();
        REQUIRE(first);
        CHECK(first->task_id == 11);
        CHECK(first->dispatch_id == 1);
        CHECK_FALSE(child.parent.poll());
        CHECK(child.parent.in_flight() == 2);
        CHECK(child.parent.oldest_in_flight() == 0);
        using Tasks = std::vector<std::pair<std::uint64_t, std::uint64_t>>;
        CHECK(child.parent.in_flight_tasks() == Tasks{{0, 10}, {2, 12}});
        // The oldest finishing moves the window past the frame already taken.
        child.finish(0, 10);
        CHECK(child.parent.poll()->task_id == 10);
        CHECK(child.parent.oldest_in_flight() == 2);
        CHECK(child.parent.in_flight() == 1);
        child.finish(2, 12);
        CHECK(child.parent.poll()->task_id == 12);
        CHECK(child.parent.in_flight() == 0);
        CHECK(child.parent.in_flight_tasks().empty());
    }
    SECTION("in any order: a frame still running keeps its slot, so the ring waits for it after a full turn") {
        PlayedChild child(true);
        child.submit(1000);
        for (std::uint64_t d = 1; d < MAILBOX_FRAMES; ++d) {
            REQUIRE(child.parent.can_submit());
            REQUIRE(child.submit(1000 + d) == d);
            child.finish(d, 1000 + d);
            REQUIRE(child.parent.poll()->task_id == 1000 + d);
        }
        CHECK(child.parent.in_flight() == 1);
        CHECK_FALSE(child.parent.can_submit());
        child.finish(0, 1000);
        CHECK(child.parent.poll()->task_id == 1000);
        CHECK(child.parent.can_submit());
        CHECK(child.submit(2000) == MAILBOX_FRAMES);
        child.finish(MAILBOX_FRAMES, 2000);
        CHECK(child.parent.poll()->task_id == 2000);
    }
    SECTION("in any order: a result whose trailer does not match poisons the mailbox") {
        PlayedChild child(true);
        child.submit(10);
        child.submit(11);
        child.finish(1, 99);
        CHECK_THROWS_AS(child.parent.poll(), ipc::MailboxPoisoned);
    }
}
