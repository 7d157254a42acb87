// bench_gpu_engine: how busy canopy keeps one GPU, next to baselines measured in the same run on the same GPU
// (docs/performance.md):
//   (a) raw launches   canopy's scale kernel over 1024 float32 launched from this process through the chip's own
//                      Launcher, 1000 times: synchronizing after each launch, and queued on one stream with one
//                      synchronize at the end; an empty kernel the same two ways
//   (b) task graphs    through the daemon's service (run in this process with a socket, as canopyd runs it) and the
//                      control protocol: one `run` with wait of 1000 independent scale tasks on one cuda chip (each
//                      over its own 1024 float32 of a CUDA_VMM buffer), and of a chain of 1000 scale tasks over one
//                      such view; per task = wall time from sending the request to the reply's last byte / 1000,
//                      against (a)'s queued launch. Targets: stream <= 1.3x, chain <= 1.5x
//   (c) bandwidth      copy and scale of 256 MiB float32 over CUDA_VMM buffers on the cuda chip against torch's
//                      copy_ and mul_ (python3 with torch, a subprocess), read+write bytes: one task (submit with wait)
//                      against one call, and 20 tasks in one graph against 20 calls queued. Target >= 85 %
//   (d) one task on an idle GPU   5 ms between calls: `canopy submit scale ... --wait` through the CLI's own code
//                      (cli::run_cli: connect, request, reply, render), a submit with wait over a connected socket,
//                      the same for a sleep_ms of 0 on the chip (the same path with no GPU work), a direct launch +
//                      synchronize, and one byte echoed by another process blocked in epoll_wait (what waking two
//                      idle processes costs on this machine, with no canopy); no target
// Without a GPU it prints "skipped: ..." and exits 0; without torch it prints canopy's figures alone. The service
// (and its zygote) starts before this process initializes CUDA, as a forked process cannot use its parent's CUDA.
#include "bench.h"
#include "cli/app.h"
#include "control_client.h"
#include "cuda/context.h"
#include "cuda/memory.h"
#include "cuda/module.h"
#include "cuda/stream.h"
#include "engine_report.h"
#include "service_harness.h"
#include "tests/cuda/gpu_probe.h"
#include "worker/cuda/fatbin.h"
#include "worker/cuda/launcher.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <sstream>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

using namespace canopy;
using nlohmann::json;

namespace {

using Clock = std::chrono::steady_clock;

constexpr std::uint32_t SMALL = 1024;   // float32 elements of a small task
constexpr int TASKS = 1000;             // tasks of a graph, launches of a loop
constexpr int GRAPH_RUNS = 7;           // timed graphs of each kind, after one untimed
constexpr std::uint32_t BIG = 1u << 26; // float32 elements: 256 MiB
constexpr int BIG_CALLS = 50;           // timed single tasks of each kind
constexpr int BIG_QUEUED = 20;          // tasks of one graph, calls of one queued loop
constexpr int IDLE_CALLS = 30;          // calls of (d)
constexpr auto IDLE_GAP = std::chrono::milliseconds(5);
constexpr float FACTOR = 0.999f; // scale's factor: values stay normal over every run

const char* TORCH_CASES = R"(
x = torch.full((1 << 26,), 1.5, device='cuda')
y = torch.empty_like(x)
bench('copy', lambda: y.copy_(x), 50)
bench('scale', lambda: x.mul_(0.999), 50)
bench_queued('copy_queued', lambda: y.copy_(x), 20)
bench_queued('scale_queued', lambda: x.mul_(0.999), 20)
)";

double us_since(Clock::time_point start) {
    return std::chrono::duration<double, std::micro>(Clock::now() - start).count();
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
}

double p90(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[(v.size() * 9) / 10];
}

// A scale task over `count` float32 at byte `offset` of buffer `id`.
json scale_task(const std::string& name, const std::string& id, std::uint64_t offset, std::uint32_t count) {
    return {{"name", name},
            {"kernel", "scale"},
            {"on", "chip0"},
            {"args",
             {{{"tensor", {{"buffer", id}, {"dtype", "float32"}, {"shape", {count}}, {"byte_offset", offset}}},
               {"tag", "inout"}},
              {{"scalar", {{"float32", FACTOR}}}}}}};
}

json copy_task(const std::string& name, const std::string& from, const std::string& to, std::uint32_t count) {
    auto view = [&](const std::string& id) { return json{{"buffer", id}, {"dtype", "float32"}, {"shape", {count}}}; };
    return {{"name", name},
            {"kernel", "copy"},
            {"on", "chip0"},
            {"args", {{{"tensor", view(from)}, {"tag", "input"}}, {{"tensor", view(to)}, {"tag", "output"}}}}};
}

json graph_request(const std::vector<json>& tasks) {
    return {{"op", "run"}, {"wait", true}, {"graph", {{"tasks", tasks}}}};
}

bench::Latency latency(const std::vector<double>& us) {
    return {median(us), p90(us)};
}

// (a) into f.raw: canopy's scale kernel and an empty kernel launched from this process (loops of TASKS launches
// after 100 warm-up launches; queued loops: the median of GRAPH_RUNS), and (d)'s direct launch into f.direct.
void raw_launches(bench::EngineFigures& f) {
    const cuda::Driver& driver = cuda::Driver::get();
    const cuda::PrimaryContext context(driver, 0);
    const cuda::Stream stream(driver);
    const cuda::Module module(driver, worker::kernel_image());
    const worker::Launcher launcher(driver, module);
    const cuda::DeviceAllocation memory(driver, SMALL * sizeof(float));
    const std::vector<float> ones(SMALL, 1.5f);
    memory.copy_from_host(ones.data(), SMALL * sizeof(float));
    CanonicalIdentity identity{};
    identity.owner_instance = draw_owner_instance();
    identity.buffer_id = 1;
    identity.generation = 1;
    const Tensor view =
        make_tensor(make_posix_shm_descriptor(identity, SMALL * sizeof(float), Access::READWRITE, "cnpy-bench"),
                    DataType::FLOAT32, {SMALL});
    const kernels::BoundTensor bound{&view, TensorTag::INOUT, nullptr};
    const ScalarArg factor = ScalarArg::f32(FACTOR);
    const kernels::KernelCall call{"scale", std::span(&bound, 1), std::span(&factor, 1), nullptr};
    kernels::check_builtin(kernels::WorkerKind::CHIP, call, false);
    const std::uint64_t base = memory.get();
    const std::function<void()> scale = [&] { launcher.launch(call, std::span(&base, 1), stream.get()); };
    const std::function<void()> empty = [&] { launcher.launch_noop(stream.get()); };

    auto sync_each = [&](const std::function<void()>& launch, std::vector<double>* each) {
        for (int i = 0; i < 100; ++i) {
            launch();
            stream.synchronize();
        }
        const auto loop = Clock::now();
        for (int i = 0; i < TASKS; ++i) {
            const auto start = Clock::now();
            launch();
            stream.synchronize();
            if (each != nullptr) {
                each->push_back(us_since(start));
            }
        }
        return us_since(loop) / TASKS;
    };
    auto queued = [&](const std::function<void()>& launch) {
        std::vector<double> loops;
        for (int run = 0; run <= GRAPH_RUNS; ++run) {
            const auto start = Clock::now();
            for (int i = 0; i < TASKS; ++i) {
                launch();
            }
            stream.synchronize();
            if (run > 0) {
                loops.push_back(us_since(start) / TASKS);
            }
        }
        return median(loops);
    };
    bench::RawFigures& r = f.raw;
    std::vector<double> each;
    r.scale_sync_mean = sync_each(scale, &each);
    r.scale_sync_median = median(each);
    r.scale_queued = queued(scale);
    r.empty_sync_mean = sync_each(empty, nullptr);
    r.empty_queued = queued(empty);
    std::vector<double> idle;
    for (int i = 0; i < IDLE_CALLS; ++i) {
        std::this_thread::sleep_for(IDLE_GAP);
        const auto start = Clock::now();
        scale();
        stream.synchronize();
        idle.push_back(us_since(start));
    }
    f.direct = latency(idle);
}

// (b): one graph's wall time per task and its span on the chip per task; medians of GRAPH_RUNS runs after one
// untimed run.
bench::GraphFigures run_graph(bench::ControlClient& client, const json& request) {
    const std::string framed = bench::ControlClient::frame(request);
    std::vector<double> walls;
    std::vector<double> intakes;
    std::vector<double> spans;
    for (int run = 0; run <= GRAPH_RUNS; ++run) {
        const auto start = Clock::now();
        const std::string body = client.exchange(framed);
        const double wall = us_since(start);
        // steady_clock is CLOCK_MONOTONIC, the clock of the reply's start_ns.
        const auto sent_ns = static_cast<std::uint64_t>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(start.time_since_epoch()).count());
        const bench::TaskTimes times = bench::completed_tasks(body);
        if (times.count != TASKS) {
            throw std::runtime_error("a graph completed " + std::to_string(times.count) + " of " +
                                     std::to_string(TASKS) + " tasks: " + body.substr(0, 300));
        }
        if (run > 0) {
            walls.push_back(wall / TASKS);
            intakes.push_back(static_cast<double>(times.first_start_ns - sent_ns) / 1e3 / TASKS);
            spans.push_back(static_cast<double>(times.last_end_ns - times.first_start_ns) / 1e3 / TASKS);
        }
    }
    return {median(walls), median(intakes), median(spans)};
}

// (c): one task at a time (median wall and chip time of BIG_CALLS after 3 untimed), then BIG_QUEUED of them in one
// graph (median wall of GRAPH_RUNS graphs / BIG_QUEUED); milliseconds.
bench::BandwidthFigures run_big(bench::ControlClient& client, const json& task) {
    bench::BandwidthFigures t;
    std::vector<double> walls;
    std::vector<double> chip;
    const std::string framed = bench::ControlClient::frame({{"op", "submit"}, {"wait", true}, {"task", task}});
    for (int i = 0; i < 3 + BIG_CALLS; ++i) {
        const auto start = Clock::now();
        const std::string body = client.exchange(framed);
        const double wall = us_since(start);
        const bench::TaskTimes times = bench::completed_tasks(body);
        if (times.count != 1) {
            throw std::runtime_error("a 256 MiB task failed: " + body.substr(0, 300));
        }
        if (i >= 3) {
            walls.push_back(wall / 1e3);
            chip.push_back(static_cast<double>(times.last_end_ns - times.first_start_ns) / 1e6);
        }
    }
    t.one = {median(walls), median(chip)};
    std::vector<json> tasks;
    for (int i = 0; i < BIG_QUEUED; ++i) {
        json each = task;
        each["name"] = "t" + std::to_string(i);
        tasks.push_back(each);
    }
    const std::string graph = bench::ControlClient::frame(graph_request(tasks));
    std::vector<double> graphs;
    for (int run = 0; run <= GRAPH_RUNS; ++run) {
        const auto start = Clock::now();
        const std::string body = client.exchange(graph);
        const double wall = us_since(start);
        if (bench::completed_tasks(body).count != BIG_QUEUED) {
            throw std::runtime_error("a graph of 256 MiB tasks failed: " + body.substr(0, 300));
        }
        if (run > 0) {
            graphs.push_back(wall / 1e3 / BIG_QUEUED);
        }
    }
    t.queued_ms = median(graphs);
    return t;
}

json fill_request(const std::string& id, std::uint32_t count) {
    return {{"op", "submit"},
            {"wait", true},
            {"task",
             {{"kernel", "fill"},
              {"on", "chip0"},
              {"args",
               {{{"tensor", {{"buffer", id}, {"dtype", "float32"}, {"shape", {count}}}}, {"tag", "output"}},
                {{"scalar", {{"float32", 1.5}}}}}}}}};
}

// (d) through the service: a submit with wait over the connected socket, and the same task through the CLI's code
// on a connection of its own, each after IDLE_GAP.
void idle_tasks(bench::ControlClient& client, const std::string& socket, const std::string& buffer,
                bench::EngineFigures& f) {
    const std::string framed =
        bench::ControlClient::frame({{"op", "submit"}, {"wait", true}, {"task", scale_task("one", buffer, 0, SMALL)}});
    const std::vector<std::string> args{"--socket", socket,          "-q",
                                        "submit",   "scale",         "--on",
                                        "chip0",    "--inout",       buffer + ":float32:" + std::to_string(SMALL),
                                        "--scalar", "float32:0.999", "--wait"};
    const std::string nap =
        bench::ControlClient::frame({{"op", "submit"},
                                     {"wait", true},
                                     {"task",
                                      {{"name", "nap"},
                                       {"kernel", "sleep_ms"},
                                       {"on", "chip0"},
                                       {"args", json::array({json{{"scalar", {{"int64", 0}}}}})}}}});
    std::vector<double> over_socket;
    std::vector<double> host_only;
    std::vector<double> through_cli;
    for (int i = 0; i < IDLE_CALLS; ++i) {
        std::this_thread::sleep_for(IDLE_GAP);
        auto start = Clock::now();
        const std::string body = client.exchange(framed);
        over_socket.push_back(us_since(start));
        if (bench::completed_tasks(body).count != 1) {
            throw std::runtime_error("a submit over the socket failed: " + body.substr(0, 300));
        }
        std::this_thread::sleep_for(IDLE_GAP);
        start = Clock::now();
        const std::string slept = client.exchange(nap);
        host_only.push_back(us_since(start));
        if (bench::completed_tasks(slept).count != 1) {
            throw std::runtime_error("a sleep_ms over the socket failed: " + slept.substr(0, 300));
        }
        std::this_thread::sleep_for(IDLE_GAP);
        std::ostringstream out;
        std::ostringstream err;
        start = Clock::now();
        const int rc = cli::run_cli(args, out, err, cli::Environment{});
        through_cli.push_back(us_since(start));
        if (rc != 0) {
            throw std::runtime_error("canopy submit exited " + std::to_string(rc) + ": " + err.str());
        }
    }
    f.socket = latency(over_socket);
    f.host_only = latency(host_only);
    f.cli = latency(through_cli);
}

// (d)'s floor: one byte to another process blocked in epoll_wait and back, each after IDLE_GAP. Two idle processes
// wake (the echo and this one); a task through the daemon wakes its control thread, its worker and more.
bench::Latency idle_echo() {
    int pair[2];
    if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
        throw std::runtime_error("socketpair failed");
    }
    const pid_t pid = ::fork();
    if (pid == 0) {
        ::close(pair[0]);
        const int poll = ::epoll_create1(EPOLL_CLOEXEC);
        epoll_event event{};
        event.events = EPOLLIN;
        event.data.fd = pair[1];
        ::epoll_ctl(poll, EPOLL_CTL_ADD, pair[1], &event);
        char byte = 0;
        for (;;) {
            if (::epoll_wait(poll, &event, 1, -1) == 1 &&
                (::read(pair[1], &byte, 1) != 1 || ::write(pair[1], &byte, 1) != 1)) {
                ::_exit(0);
            }
        }
    }
    ::close(pair[1]);
    std::vector<double> round_trips;
    char byte = 'x';
    for (int i = 0; i < IDLE_CALLS; ++i) {
        std::this_thread::sleep_for(IDLE_GAP);
        const auto start = Clock::now();
        if (::write(pair[0], &byte, 1) != 1 || ::read(pair[0], &byte, 1) != 1) {
            throw std::runtime_error("the echo process is gone");
        }
        round_trips.push_back(us_since(start));
    }
    ::close(pair[0]);
    ::waitpid(pid, nullptr, 0);
    return latency(round_trips);
}

// (b), (c) and the service's part of (d), through the daemon's service with one cuda chip on device 0.
void service_figures(bench::EngineFigures& f) {
    bench::ServiceHarness harness("canopy-bench-engine", [](config::Config& cfg) {
        cfg.node.chips = {config::ChipConfig{0, config::ChipBackend::CUDA}};
        cfg.node.subs = 0;
    });
    bench::ControlClient client(harness.fd());
    const std::string small = client.create_vmm(std::uint64_t{TASKS} * SMALL * sizeof(float), "chip0");
    client.call(fill_request(small, TASKS * SMALL));
    std::vector<json> stream;
    std::vector<json> chain;
    for (int i = 0; i < TASKS; ++i) {
        const std::uint64_t offset = std::uint64_t{SMALL} * sizeof(float) * static_cast<std::uint64_t>(i);
        stream.push_back(scale_task("s" + std::to_string(i), small, offset, SMALL));
        chain.push_back(scale_task("c" + std::to_string(i), small, 0, SMALL));
    }
    f.stream = run_graph(client, graph_request(stream));
    f.chain = run_graph(client, graph_request(chain));

    const std::string x = client.create_vmm(std::uint64_t{BIG} * sizeof(float), "chip0");
    const std::string y = client.create_vmm(std::uint64_t{BIG} * sizeof(float), "chip0");
    client.call(fill_request(x, BIG));
    f.copy = run_big(client, copy_task("copy", x, y, BIG));
    f.scale = run_big(client, scale_task("scale", x, 0, BIG));

    idle_tasks(client, harness.socket(), small, f);
}

} // namespace

int main() {
    const auto& probe = testing::gpu_probe();
    if (probe.devices < 1) {
        std::printf("bench_gpu_engine: skipped: no GPU (%s)\n", probe.devices < 0 ? probe.why.c_str() : "0 visible");
        return 0;
    }
    if (worker::kernel_image().empty()) {
        std::printf("bench_gpu_engine: skipped: no GPU kernels (built without the CUDA Toolkit)\n");
        return 0;
    }
    std::string torch_version;
    const auto torch = bench::run_torch(TORCH_CASES, torch_version);
    bench::EngineFigures f;
    f.tasks = TASKS;
    f.queued = BIG_QUEUED;
    f.big_bytes = 2.0 * BIG * sizeof(float);
    f.idle_calls = IDLE_CALLS;
    f.idle_gap_ms = static_cast<int>(IDLE_GAP.count());
    try {
        f.echo = idle_echo(); // forked before this process initializes CUDA
        service_figures(f);
        raw_launches(f);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_gpu_engine: %s\n", e.what());
        return 1;
    }
    std::printf("bench_gpu_engine: %d GPU(s), %d CPUs online; %s\n", probe.devices,
                static_cast<int>(::sysconf(_SC_NPROCESSORS_ONLN)),
                torch.empty() ? "torch not available (canopy alone)" : torch_version.c_str());
    bench::print_engine_report(f, torch);
    return 0;
}
