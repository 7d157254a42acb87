// bench_remote: a no-op task on a remote node between two network namespaces (the L4's host "rack" and the node's
// "hb", joined by a veth pair) against, measured in the same run and interleaved round by round:
//   tcp_rtt      a 64-byte ping-pong over one TCP connection between the same namespaces
//   grpc_ping    a unary gRPC call to the node's canopyd (Echo, a task call's shape answered at once), between them
//   grpc_stream  one task call and its reply on an open gRPC Tasks stream to an echo in hb's namespace: what a
//                remote task pays for gRPC once its stream is open, with no daemon behind it
//   local_noop   the same no-op task on the L4's own sub (its control socket, the C++ client)
//   node_noop    the same no-op task on ha/sub0, a local nested level-3 node of the same L4: the remote node's
//                counterpart on the L4's own host, one supervisor between the L4 and the sub as on hb
//   remote_noop  sleep_ms 0 on hb/sub0 through the L4 (the C++ client on the L4's socket)
//   local_batch, remote_batch  one graph of CALLS_PER_ROUND independent no-ops on sub0 or hb/sub0, run to its
//                end (run_wait): the wall time per task when many are in flight at once
// and prints the medians and the ratios the remote-node targets are stated in. Then, for bytes across hosts:
//   tcp_stream   256 MiB sent over one TCP connection from rack to hb, into memory there
//   copy_push    copy of a 256 MiB posix_shm buffer of rack into one of hb, on hb/sub0 (a Write stream)
//   copy_pull    the other way, on the L4's sub0 (a Read stream)
// each COPY_ROUNDS times interleaved, as GB/s of the median. Needs root (namespaces); prints "skipped:" and exits 0
// without. Never registered with ctest. COPY_ROUNDS 0 leaves the copies out.
//
// With a fourth argument, a worker of the L4 (sub0, ha/sub0, hb/sub0), it runs only no-op tasks on that worker
// (CALLS_PER_ROUND / 4 to warm up, then ROUNDS * CALLS_PER_ROUND) and prints their median: a run to profile one
// path alone, under `perf sched` for instance (docs/performance.md, "Wake-ups per task").
//
//   bench_remote [ROUNDS [CALLS_PER_ROUND [COPY_ROUNDS [WORKER]]]]
#include "bench.h"
#include "client/connection.h"
#include "daemon/remote_server.h"
#include "ipc/cpus.h"
#include "remote/canopy_remote.grpc.pb.h"
#include "tests/remote/hosts.h"
#include "tests/remote/remote_fixture.h"

#include <arpa/inet.h>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>
#include <utility>

namespace {

using namespace canopy;
namespace pb = canopy::remote::v1;
using Clock = std::chrono::steady_clock;

constexpr std::uint16_t NODE_PORT = 7471;
constexpr std::uint16_t ECHO_PORT = 7473;
constexpr std::uint16_t SINK_PORT = 7474;
constexpr std::uint16_t STREAM_PORT = 7475;
constexpr std::uint64_t COPY_BYTES = std::uint64_t{256} << 20;

double since_ns(Clock::time_point start) {
    return static_cast<double>(std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - start).count());
}

bool enter_netns(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    const bool ok = fd >= 0 && ::setns(fd, CLONE_NEWNET) == 0;
    if (fd >= 0) {
        ::close(fd);
    }
    return ok;
}

// A Tasks stream that answers each call at once with an empty reply of its call id: the cost of one message each
// way on a gRPC stream that is already open, with nothing behind it.
class EchoStream final : public grpc::ServerBidiReactor<pb::TaskCalls, pb::TaskReplies> {
public:
    EchoStream() { StartRead(&in_); }
    void OnReadDone(bool ok) override {
        if (!ok) {
            Finish(grpc::Status::OK);
            return;
        }
        out_.clear_replies();
        for (const pb::TaskCall& call : in_.calls()) {
            out_.add_replies()->set_call_id(call.call_id());
        }
        StartWrite(&out_);
    }
    void OnWriteDone(bool ok) override {
        if (!ok) {
            Finish(grpc::Status::CANCELLED);
            return;
        }
        StartRead(&in_);
    }
    void OnDone() override { delete this; }

private:
    pb::TaskCalls in_;
    pb::TaskReplies out_;
};

class EchoService final : public pb::Node::CallbackService {
    grpc::ServerBidiReactor<pb::TaskCalls, pb::TaskReplies>* Tasks(grpc::CallbackServerContext*) override {
        return new EchoStream;
    }
};

// The peer side, in hb's namespace: a TCP echo server, a TCP sink and a gRPC Tasks stream that echoes.
[[noreturn]] void serve_peer() {
    EchoService echo_service;
    grpc::ServerBuilder builder;
    builder.AddListeningPort("0.0.0.0:" + std::to_string(STREAM_PORT), grpc::InsecureServerCredentials());
    builder.RegisterService(&echo_service);
    const std::unique_ptr<grpc::Server> stream_server = builder.BuildAndStart();
    std::thread echo([] {
        const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const int one = 1;
        ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(ECHO_PORT);
        ::bind(listener, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
        ::listen(listener, 4);
        for (;;) {
            const int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
            ::setsockopt(c, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
            std::thread([c] {
                char buf[64];
                for (;;) {
                    const ssize_t n = ::recv(c, buf, sizeof buf, MSG_WAITALL);
                    if (n <= 0 || ::send(c, buf, static_cast<std::size_t>(n), MSG_NOSIGNAL) != n) {
                        ::close(c);
                        return;
                    }
                }
            }).detach();
        }
    });
    // A sink: reads each connection to its end into one buffer, then answers one byte.
    std::thread sink([] {
        const int listener = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        const int one = 1;
        ::setsockopt(listener, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
        sockaddr_in addr{};
        addr.sin_family = AF_INET;
        addr.sin_port = htons(SINK_PORT);
        ::bind(listener, reinterpret_cast<const sockaddr*>(&addr), sizeof addr);
        ::listen(listener, 4);
        std::vector<char> into(COPY_BYTES);
        for (;;) {
            const int c = ::accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
            std::uint64_t got = 0;
            for (ssize_t n; (n = ::recv(c, into.data() + got % COPY_BYTES,
                                        static_cast<std::size_t>(COPY_BYTES - got % COPY_BYTES), 0)) > 0;) {
                got += static_cast<std::uint64_t>(n);
            }
            const char ack = 1;
            (void)::send(c, &ack, 1, MSG_NOSIGNAL);
            ::close(c);
        }
    });
    echo.join();
    std::_Exit(0);
}

// In the L4's namespace (a forked child): sends COPY_BYTES from memory to hb's sink and waits for its answer;
// writes the nanoseconds taken to `out`.
void stream_from_rack(const std::string& hb, int out) {
    std::vector<char> bytes(COPY_BYTES, 'x');
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(SINK_PORT);
    ::inet_pton(AF_INET, hb.c_str(), &addr.sin_addr);
    if (::connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        std::_Exit(3);
    }
    const auto start = Clock::now();
    for (std::uint64_t sent = 0; sent < COPY_BYTES;) {
        const ssize_t n = ::send(s, bytes.data() + sent, static_cast<std::size_t>(COPY_BYTES - sent), MSG_NOSIGNAL);
        if (n <= 0) {
            std::_Exit(4);
        }
        sent += static_cast<std::uint64_t>(n);
    }
    ::shutdown(s, SHUT_WR);
    char ack = 0;
    if (::recv(s, &ack, 1, MSG_WAITALL) != 1) {
        std::_Exit(5);
    }
    const double ns = since_ns(start);
    ::close(s);
    if (::write(out, &ns, sizeof ns) != static_cast<ssize_t>(sizeof ns)) {
        std::_Exit(6);
    }
}

// Forks a process in the namespace at `netns` running `body`; returns its pid.
template <class F>
pid_t fork_in(const std::string& netns, F body) {
    const pid_t pid = ::fork();
    if (pid == 0) {
        if (!enter_netns(netns)) {
            std::_Exit(126);
        }
        body();
        std::_Exit(0);
    }
    return pid;
}

// Where a no-op task's time goes, from the times its state carries (CLOCK_MONOTONIC, one clock for every
// namespace of this machine): request sent -> recorded by the L4, recorded -> its worker starts it (for a remote
// task, hb's sub), the task itself, the worker's end -> the reply read by the client. Nanoseconds.
struct Stages {
    std::vector<double> intake, to_worker, run, back;
};

struct Samples {
    std::vector<double> tcp, grpc, grpc_stream, local, node, remote;
    std::vector<double> local_batch, remote_batch; // nanoseconds per task of one graph of independent no-ops
    Stages local_stages, node_stages, remote_stages;
};

// In the L4's namespace (a forked child): `calls` TCP ping-pongs, `calls` gRPC pings to hb's canopyd and `calls`
// round trips on an open gRPC stream to the peer's echo, written to `out` as raw doubles in that order.
void ping_from_rack(const std::string& hb, int calls, int out) {
    std::vector<double> ns;
    const int s = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    const int one = 1;
    ::setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(ECHO_PORT);
    ::inet_pton(AF_INET, hb.c_str(), &addr.sin_addr);
    if (::connect(s, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) {
        std::_Exit(3);
    }
    char buf[64] = {};
    for (int i = 0; i < calls; ++i) {
        const auto start = Clock::now();
        ::send(s, buf, sizeof buf, MSG_NOSIGNAL);
        ::recv(s, buf, sizeof buf, MSG_WAITALL);
        ns.push_back(since_ns(start));
    }
    ::close(s);
    auto channel = grpc::CreateChannel(hb + ":" + std::to_string(NODE_PORT), grpc::InsecureChannelCredentials());
    auto stub = pb::Node::NewStub(channel);
    pb::TaskCall call;
    call.set_session(1);
    call.set_kernel("sleep_ms");
    call.set_worker("sub0");
    call.set_args(std::string(40, '\0'));
    call.set_launch(std::string(32, '\0'));
    for (int i = 0; i < calls + calls / 4; ++i) {
        grpc::ClientContext context;
        pb::TaskReply reply;
        const auto start = Clock::now();
        if (!stub->Echo(&context, call, &reply).ok()) {
            std::_Exit(4);
        }
        if (i >= calls / 4) {
            ns.push_back(since_ns(start));
        }
    }
    auto stream_channel =
        grpc::CreateChannel(hb + ":" + std::to_string(STREAM_PORT), grpc::InsecureChannelCredentials());
    auto stream_stub = pb::Node::NewStub(stream_channel);
    grpc::ClientContext stream_context;
    const auto stream = stream_stub->Tasks(&stream_context);
    pb::TaskCalls single;
    *single.add_calls() = call;
    for (int i = 0; i < calls + calls / 4; ++i) {
        single.mutable_calls(0)->set_call_id(static_cast<std::uint64_t>(i));
        pb::TaskReplies reply;
        const auto start = Clock::now();
        if (!stream->Write(single) || !stream->Read(&reply)) {
            std::_Exit(6);
        }
        if (i >= calls / 4) {
            ns.push_back(since_ns(start));
        }
    }
    stream->WritesDone();
    (void)stream->Finish();
    const auto bytes = ns.size() * sizeof(double);
    if (::write(out, ns.data(), bytes) != static_cast<ssize_t>(bytes)) {
        std::_Exit(5);
    }
}

void noop_calls(client::Connection& c, const std::string& on, int calls, std::vector<double>& into,
                Stages* stages = nullptr) {
    const client::Task noop = client::Task::from_json(
        {{"name", "noop"}, {"kernel", "sleep_ms"}, {"on", on}, {"args", {{{"scalar", {{"int64", 0}}}}}}});
    for (int i = 0; i < calls; ++i) {
        const auto start = Clock::now();
        const client::TaskState state = c.submit_wait(noop);
        const auto end = Clock::now();
        if (state.status != client::TaskStatus::COMPLETED) {
            throw std::runtime_error("the no-op task on " + on + " did not complete: " + state.error_message);
        }
        into.push_back(since_ns(start));
        if (stages != nullptr) {
            const auto mono = [](Clock::time_point t) { // steady_clock is CLOCK_MONOTONIC
                return static_cast<double>(
                    std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count());
            };
            stages->intake.push_back(static_cast<double>(state.submitted_ns) - mono(start));
            stages->to_worker.push_back(static_cast<double>(state.start_ns - state.submitted_ns));
            stages->run.push_back(static_cast<double>(state.end_ns - state.start_ns));
            stages->back.push_back(mono(end) - static_cast<double>(state.end_ns));
        }
    }
}

// One graph of `calls` independent no-op tasks on `on`, run to its end: the wall time per task, which many tasks
// in flight at once share.
double batch_per_task(client::Connection& c, const std::string& on, int calls) {
    client::Graph graph;
    for (int i = 0; i < calls; ++i) {
        graph.add(client::Task::from_json({{"name", "noop" + std::to_string(i)},
                                           {"kernel", "sleep_ms"},
                                           {"on", on},
                                           {"args", {{{"scalar", {{"int64", 0}}}}}}}));
    }
    const auto start = Clock::now();
    const std::vector<client::TaskState> states = c.run_wait(graph);
    const double ns = since_ns(start);
    for (const client::TaskState& state : states) {
        if (state.status != client::TaskStatus::COMPLETED) {
            throw std::runtime_error("a no-op task of the graph on " + on +
                                     " did not complete: " + state.error_message);
        }
    }
    return ns / calls;
}

// One task through the client, timed; throws when it does not complete.
double timed_task(client::Connection& c, const nlohmann::json& task) {
    const client::Task t = client::Task::from_json(task);
    const auto start = Clock::now();
    const auto result = c.submit_wait(t);
    if (result.status != client::TaskStatus::COMPLETED) {
        throw std::runtime_error(task.dump() + " did not complete: " + result.error_message);
    }
    return since_ns(start);
}

double median_us(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return bench::detail::percentile(v, 50) / 1e3;
}

// The peer process, killed and reaped when the benchmark ends, whichever way it ends.
struct Reaped {
    explicit Reaped(pid_t p) : pid(p) {}
    pid_t pid;
    Reaped(const Reaped&) = delete;
    Reaped& operator=(const Reaped&) = delete;
    ~Reaped() {
        ::kill(pid, SIGKILL);
        ::waitpid(pid, nullptr, 0);
    }
};

// The benchmark; a failure throws, so that the daemons, the peer and the namespaces go with the stack.
int run(int argc, char** argv) {
    using namespace canopy::e2e;
    const int rounds = argc > 1 ? std::atoi(argv[1]) : 5;
    const int calls = argc > 2 ? std::atoi(argv[2]) : 400;
    if (const std::string why = TestNetwork::unavailable(); !why.empty()) {
        std::printf("skipped: %s\n", why.c_str());
        return 0;
    }
    TestNetwork net({"rack", "hb"});
    const Reaped peer{fork_in(net.netns_path("hb"), [] { serve_peer(); })};
    const nlohmann::json peers = {{"testing", {{"insecure_peers", true}}}};
    const nlohmann::json node = {{"name", "hb"}, {"level", 3}, {"subs", 1}};
    nlohmann::json hb_config = l3_config("hb", "0.0.0.0:" + std::to_string(NODE_PORT), "insecure", peers);
    hb_config["node"] = node;
    Daemon hb(hb_config, {}, net.enter("hb")),
        rack(l4_config({{{"name", "ha"}, {"subs", 1}},
                        remote_node("hb", net.address("hb") + ":" + std::to_string(NODE_PORT), "insecure", 3000)},
                       peers),
             {}, net.enter("rack"));
    if (!eventually_running(rack, "/hb/sub0") || !eventually_running(rack, "/ha/sub0")) {
        std::fprintf(stderr, "bench_remote: hb did not attach:\n%s\n", rack.log().c_str());
        return 1;
    }
    client::Connection connection = client::Connection::connect(rack.socket());
    Samples s;
    std::vector<double> warm;
    if (argc > 4) {
        const std::string worker = argv[4];
        noop_calls(connection, worker, calls / 4, warm);
        for (int r = 0; r < rounds; ++r) {
            noop_calls(connection, worker, calls, s.remote);
        }
        std::printf("%s: %zu no-op tasks after %d to warm up, median %.1f us\n", worker.c_str(), s.remote.size(),
                    calls / 4, median_us(s.remote));
        return 0;
    }
    noop_calls(connection, "hb/sub0", calls / 4, warm);
    noop_calls(connection, "sub0", calls / 4, warm);
    noop_calls(connection, "ha/sub0", calls / 4, warm);
    for (int r = 0; r < rounds; ++r) {
        int pipe_fds[2];
        if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
            return 1;
        }
        const pid_t pinger =
            fork_in(net.netns_path("rack"), [&] { ping_from_rack(net.address("hb"), calls, pipe_fds[1]); });
        ::close(pipe_fds[1]);
        std::vector<double> got(static_cast<std::size_t>(3 * calls));
        const auto want = got.size() * sizeof(double);
        std::size_t have = 0;
        for (ssize_t n;
             have < want && (n = ::read(pipe_fds[0], reinterpret_cast<char*>(got.data()) + have, want - have)) > 0;) {
            have += static_cast<std::size_t>(n);
        }
        ::close(pipe_fds[0]);
        int status = 0;
        ::waitpid(pinger, &status, 0);
        if (have != want) {
            std::fprintf(stderr, "bench_remote: the ping process failed (status %d)\n", status);
            return 1;
        }
        s.tcp.insert(s.tcp.end(), got.begin(), got.begin() + calls);
        s.grpc.insert(s.grpc.end(), got.begin() + calls, got.begin() + 2 * calls);
        s.grpc_stream.insert(s.grpc_stream.end(), got.begin() + 2 * calls, got.end());
        noop_calls(connection, "sub0", calls, s.local, &s.local_stages);
        noop_calls(connection, "ha/sub0", calls, s.node, &s.node_stages);
        noop_calls(connection, "hb/sub0", calls, s.remote, &s.remote_stages);
        s.local_batch.push_back(batch_per_task(connection, "sub0", calls));
        s.remote_batch.push_back(batch_per_task(connection, "hb/sub0", calls));
    }
    // Bytes across hosts.
    const int copy_rounds = argc > 3 ? std::atoi(argv[3]) : 5;
    const std::string size = std::to_string(COPY_BYTES);
    const std::string here = rack.create_buffer(COPY_BYTES);
    const std::string there = rack.cli_json({"buffer", "create", "--bytes", size, "--on", "hb"}).at("id");
    const auto view = [](const std::string& id) {
        return nlohmann::json{{"buffer", id}, {"dtype", "uint8"}, {"shape", {COPY_BYTES}}};
    };
    const auto copy = [&](const std::string& on, const std::string& from, const std::string& to) {
        return nlohmann::json{
            {"name", "copy"},
            {"kernel", "copy"},
            {"on", on},
            {"args", {{{"tensor", view(from)}, {"tag", "input"}}, {{"tensor", view(to)}, {"tag", "output"}}}}};
    };
    std::vector<double> stream_ns, push_ns, pull_ns;
    if (copy_rounds > 0) {
        (void)timed_task(connection, copy("hb/sub0", here, there)); // maps the pages on both sides once
    }
    for (int r = 0; r < copy_rounds; ++r) {
        int pipe_fds[2];
        if (::pipe2(pipe_fds, O_CLOEXEC) != 0) {
            return 1;
        }
        const pid_t sender = fork_in(net.netns_path("rack"), [&] { stream_from_rack(net.address("hb"), pipe_fds[1]); });
        ::close(pipe_fds[1]);
        double ns = 0;
        const bool read = ::read(pipe_fds[0], &ns, sizeof ns) == static_cast<ssize_t>(sizeof ns);
        ::close(pipe_fds[0]);
        int status = 0;
        ::waitpid(sender, &status, 0);
        if (!read) {
            std::fprintf(stderr, "bench_remote: the stream process failed (status %d)\n", status);
            return 1;
        }
        stream_ns.push_back(ns);
        push_ns.push_back(timed_task(connection, copy("hb/sub0", here, there)));
        pull_ns.push_back(timed_task(connection, copy("sub0", there, here)));
    }
    const auto gbps = [](const std::vector<double>& ns) {
        return static_cast<double>(COPY_BYTES) / (median_us(ns) * 1e3);
    };
    const double tcp = median_us(s.tcp), grpc = median_us(s.grpc), grpc_stream = median_us(s.grpc_stream),
                 local = median_us(s.local), local_node = median_us(s.node), remote = median_us(s.remote);
    std::printf("rounds %d x %d calls, medians in us\n", rounds, calls);
    // The daemons inherit this process's environment and affinity, so they decide as it does.
    std::printf("spinning waits: %s\n", canopy::ipc::spin_decision().summary().c_str());
    std::printf("tcp_rtt_us %.1f\ngrpc_ping_us %.1f\ngrpc_stream_rtt_us %.1f\nlocal_noop_us %.1f\nnode_noop_us %.1f\n"
                "remote_noop_us %.1f\n",
                tcp, grpc, grpc_stream, local, local_node, remote);
    std::printf("remote_noop / grpc_ping %.2f (target <= 3)\n", remote / grpc);
    std::printf("remote_noop / (tcp_rtt + local_noop) %.2f (target <= 2)\n", remote / (tcp + local));
    std::printf("remote_noop / (tcp_rtt + node_noop) %.2f\n", remote / (tcp + local_node));
    std::printf("graph of %d no-ops, per task: local_batch_us %.1f, remote_batch_us %.1f\n", calls,
                median_us(s.local_batch), median_us(s.remote_batch));
    for (const auto& [name, st] : {std::pair<const char*, const Stages&>{"local_noop", s.local_stages},
                                   std::pair<const char*, const Stages&>{"node_noop", s.node_stages},
                                   std::pair<const char*, const Stages&>{"remote_noop", s.remote_stages}}) {
        std::printf("%s stages, medians in us: sent->recorded %.1f, recorded->worker start %.1f, worker %.1f, "
                    "worker end->reply read %.1f\n",
                    name, median_us(st.intake), median_us(st.to_worker), median_us(st.run), median_us(st.back));
    }
    if (copy_rounds <= 0) {
        return 0; // no copies asked for
    }
    const double stream = gbps(stream_ns), push = gbps(push_ns), pull = gbps(pull_ns);
    std::printf("copies of %llu MiB, %d rounds, medians in GB/s\n", static_cast<unsigned long long>(COPY_BYTES >> 20),
                copy_rounds);
    std::printf("tcp_stream_gbps %.2f\ncopy_push_gbps %.2f\ncopy_pull_gbps %.2f\n", stream, push, pull);
    std::printf("copy_push / tcp_stream %.2f (target >= 0.70)\n", push / stream);
    std::printf("copy_pull / tcp_stream %.2f (target >= 0.70)\n", pull / stream);
    return 0;
}

} // namespace

int main(int argc, char** argv) {
    try {
        return run(argc, argv);
    } catch (const std::exception& e) {
        std::fprintf(stderr, "bench_remote: %s\n", e.what());
        return 1;
    }
}
