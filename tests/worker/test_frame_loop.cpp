// serve_frames and its runner: before each frame the loop tells the runner whether that frame already waits, and
// before it can block it says none does. A cuda chip seals its launches there (worker/cuda/cuda_chip.cpp); a launch
// left unsealed when the loop blocks would never be reported.
#include "ipc/mailbox_child.h"
#include "ipc/mailbox_parent.h"
#include "protocol/task_args.h"
#include "worker/worker_loop.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace canopy;

namespace {

// Runs @noop frames and records every before_next() call.
class RecordingRunner final : public worker::FrameRunner {
public:
    void before_next(bool next_ready) noexcept override {
        std::lock_guard lock(mu_);
        calls_.push_back(next_ready);
        cv_.notify_all();
    }

    // The calls so far, once there are at least `n` (or after 10 s).
    std::vector<bool> calls_after(std::size_t n) {
        std::unique_lock lock(mu_);
        cv_.wait_for(lock, std::chrono::seconds(10), [&] { return calls_.size() >= n; });
        return calls_;
    }

protected:
    void release(const CanonicalIdentity&) override {}
    void create_vmm(const worker::VmmCreate&) override {}
    void bind() override {}
    void execute(std::string_view, const LaunchConfig&) override {}

private:
    std::mutex mu_;
    std::condition_variable cv_;
    std::vector<bool> calls_;
};

} // namespace

TEST_CASE("serve_frames tells its runner before each frame whether one waits, and that none does before it blocks",
          "[worker][frame_loop]") {
    ipc::MailboxParent parent(1);
    ipc::MailboxChild child(parent.fd(), 1);
    const std::vector<std::byte> blob = encode_task_args(TaskArgs{});
    std::uint64_t task = 0;
    auto submit = [&] {
        REQUIRE(parent.can_submit());
        parent.submit({++task, "@noop", "", {}, blob});
    };
    // Three frames wait before the loop starts.
    submit();
    submit();
    submit();
    RecordingRunner runner;
    int rc = -1;
    std::thread loop([&] { rc = worker::serve_frames(child, runner); });
    for (int i = 0; i < 3; ++i) {
        REQUIRE(parent.wait(10'000'000'000ULL));
        const auto done = parent.poll();
        REQUIRE(done.has_value());
        CHECK(done->code == ErrorCode::OK);
    }
    // Before each of the three frames one waited; then none did, and the loop blocks.
    CHECK(runner.calls_after(4) == std::vector<bool>{true, true, true, false});
    // A frame that comes while it blocks is taken, and before the loop waits again it says none waits.
    submit();
    REQUIRE(parent.wait(10'000'000'000ULL));
    CHECK(parent.poll().has_value());
    CHECK(runner.calls_after(5) == std::vector<bool>{true, true, true, false, false});
    parent.request_shutdown();
    loop.join();
    CHECK(rc == 0);
}
