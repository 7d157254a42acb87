// bench_mailbox: the dispatch path through a real worker process.
//   spin round trip   baseline: two processes ping-pong one word of shared memory, each spinning
//   mailbox round trip  one @noop task with one tensor argument: the parent writes the frame, the worker
//                     decodes and validates the blob, materializes the tensor, and publishes the result
//   stream            10 000 such tasks kept in flight through the ring; time per task
// The worker is forked before any thread exists and pinned nowhere; both sides spin, then block.
#include "bench.h"
#include "daemon/buffer_registry.h"
#include "ipc/child_message.h"
#include "ipc/fd_passing.h"
#include "ipc/futex.h"
#include "ipc/mailbox_parent.h"
#include "worker/worker_loop.h"

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

using namespace canopy;

namespace {

struct alignas(64) PingPong {
    std::atomic<std::uint64_t> ping{0};
    alignas(64) std::atomic<std::uint64_t> pong{0};
};

bench::Result spin_round_trip() {
    void* mem = ::mmap(nullptr, sizeof(PingPong), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    auto* pp = new (mem) PingPong{};
    const pid_t pid = ::fork();
    if (pid == 0) {
        std::uint64_t seen = 0;
        for (;;) {
            std::uint64_t v;
            while ((v = pp->ping.load(std::memory_order_acquire)) == seen) {
                ipc::cpu_relax();
            }
            if (v == UINT64_MAX) {
                ::_exit(0);
            }
            seen = v;
            pp->pong.store(v, std::memory_order_release);
        }
    }
    std::uint64_t seq = 0;
    const auto result = bench::measure([&] {
        pp->ping.store(++seq, std::memory_order_release);
        while (pp->pong.load(std::memory_order_acquire) != seq) {
            ipc::cpu_relax();
        }
    });
    pp->ping.store(UINT64_MAX, std::memory_order_release);
    ::waitpid(pid, nullptr, 0);
    ::munmap(mem, sizeof(PingPong));
    return result;
}

struct Worker {
    ipc::MailboxParent mailbox{1};
    ipc::UniqueFd control;
    pid_t pid = -1;

    Worker() {
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
        ipc::recv_message(control.get(), std::as_writable_bytes(std::span(&ready, 1)), fds);
    }
    ~Worker() {
        mailbox.request_shutdown();
        ::waitpid(pid, nullptr, 0);
    }
    void drain_one() {
        for (;;) {
            if (auto c = mailbox.poll()) {
                if (c->code != ErrorCode::OK) {
                    std::fprintf(stderr, "task failed: %s\n", c->message.c_str());
                    std::abort();
                }
                return;
            }
            ipc::cpu_relax();
        }
    }
};

} // namespace

int main() {
    char tmpl[] = "/tmp/canopy-bench-XXXXXX";
    const std::filesystem::path state = ::mkdtemp(tmpl);
    std::printf("bench_mailbox: %d CPUs online\n\n", static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)));
    bench::print_header();
    const bench::Result spin = spin_round_trip();
    {
        daemon::BufferRegistry registry(state / "journal");
        const auto buf = registry.create_posix_shm(4096, Access::READWRITE, "/");
        TaskArgs args;
        args.tensors.push_back({make_tensor(buf, DataType::FLOAT32, {1024}), TensorTag::INOUT});
        const auto blob = encode_task_args(args);
        Worker w;
        const ipc::Dispatch noop{1, "@noop", "", {}, blob};
        w.mailbox.submit(noop); // first sight maps the buffer
        w.drain_one();
        const auto round_trip = bench::measure([&] {
            w.mailbox.submit(noop);
            w.drain_one();
        });
        bench::print_row("spin round trip (2 processes, 1 word)", spin, "spin round trip", spin);
        bench::print_row("mailbox round trip (@noop, 1 tensor)", round_trip, "spin round trip", spin);

        constexpr int STREAM = 10000;
        const auto stream = bench::measure(
            [&] {
                int submitted = 0;
                int done = 0;
                while (done < STREAM) {
                    while (submitted < STREAM && w.mailbox.can_submit()) {
                        w.mailbox.submit(noop);
                        ++submitted;
                    }
                    while (auto c = w.mailbox.poll()) {
                        ++done;
                    }
                    ipc::cpu_relax();
                }
            },
            {11, std::chrono::milliseconds(1)});
        bench::Result per_task = stream;
        per_task.median_ns /= STREAM;
        per_task.p10_ns /= STREAM;
        per_task.p90_ns /= STREAM;
        bench::print_row("stream of 10 000 @noop tasks, per task", per_task, "spin round trip", spin);
        std::printf("\ntarget mailbox round trip <= 1000 ns median: %s (%.0f ns)\n",
                    round_trip.median_ns <= 1000 ? "met" : "missed", round_trip.median_ns);
        std::printf("target mailbox round trip <= 4x spin round trip: %s (%.1fx)\n",
                    round_trip.median_ns <= 4 * spin.median_ns ? "met" : "missed",
                    round_trip.median_ns / spin.median_ns);
        std::printf("target marginal cost per task over 10 000 <= 1000 ns: %s (%.0f ns)\n",
                    per_task.median_ns <= 1000 ? "met" : "missed", per_task.median_ns);
    }
    std::filesystem::remove_all(state);
    return 0;
}
