// Remote nodes over loopback: a level-4 canopyd whose node "hb" is a level-3 canopyd reached over gRPC, both real
// processes. What crosses a network between hosts (namespaces, TLS, partitions) is in test_remote_netns.cpp.
#include "daemon/remote_server.h"
#include "protocol/mailbox.h"
#include "protocol/task_args.h"
#include "remote/canopy_remote.grpc.pb.h"
#include "tests/remote/remote_fixture.h"
#include "tests/sanitizers.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <condition_variable>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <grpcpp/grpcpp.h>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <thread>

using namespace canopy::e2e;
using nlohmann::json;

namespace {

// The local port of the established TCP connection that process `pid` holds to port `port` of its peer; 0 when it
// holds none. Read from /proc: the socket inodes of the process's fds, looked up in its namespace's TCP table.
std::uint16_t local_port_to(pid_t pid, std::uint16_t port) {
    std::set<std::string> inodes;
    const std::filesystem::path fds = "/proc/" + std::to_string(pid) + "/fd";
    for (const auto& fd : std::filesystem::directory_iterator(fds)) {
        std::error_code ec;
        const std::string target = std::filesystem::read_symlink(fd.path(), ec).string();
        if (!ec && target.starts_with("socket:[")) {
            inodes.insert(target.substr(8, target.size() - 9));
        }
    }
    // gRPC may dial an IPv4 address from an IPv6 socket: both tables are read.
    for (const char* name : {"tcp", "tcp6"}) {
        std::ifstream table("/proc/" + std::to_string(pid) + "/net/" + name);
        std::string line;
        std::getline(table, line); // the header
        while (std::getline(table, line)) {
            std::istringstream fields(line);
            std::string slot, local, remote, state, queues, timer, retransmits, uid, timeout, inode;
            fields >> slot >> local >> remote >> state >> queues >> timer >> retransmits >> uid >> timeout >> inode;
            const auto port_of = [](const std::string& address) {
                return static_cast<std::uint16_t>(std::stoul(address.substr(address.find(':') + 1), nullptr, 16));
            };
            if (state == "01" && inodes.contains(inode) && port_of(remote) == port) {
                return port_of(local);
            }
        }
    }
    return 0;
}

// Breaks the L4's own connection to its remote node's port `port` (its task stream's), not the link's, which the
// link's child process holds: `ss -K` destroys that socket.
void break_task_connection(const Daemon& rack, std::uint16_t port) {
    const std::uint16_t local = local_port_to(rack.pid(), port);
    REQUIRE(local != 0);
    const std::string kill_socket =
        "ss -K -t 'sport = :" + std::to_string(local) + " and dport = :" + std::to_string(port) + "' >/dev/null";
    REQUIRE(std::system(kill_socket.c_str()) == 0);
}

// Polls until remote node /hb runs with another link than `first_link` (its pid): a new session.
bool eventually_new_link(const Daemon& rack, const json& first_link) {
    return eventually([&] {
        const json hb_now = worker_at(rack.cli_json({"status"}), "/hb");
        return hb_now.at("state") == "running" && hb_now.at("pid") != first_link;
    });
}

} // namespace

TEST_CASE("an L4 runs tasks on a remote node's chip and sub and shows the node's tree", "[remote]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    const json status = rack.cli_json({"status"});
    CHECK(worker_at(status, "/hb").at("kind") == "remote");
    CHECK(worker_at(status, "/hb").at("state") == "running");
    CHECK(worker_at(status, "/hb/chip0").at("kind") == "chip");
    CHECK(worker_at(status, "/hb/chip0").at("backend") == "sim");
    CHECK(worker_at(status, "/hb/sub0").at("state") == "running");
    CHECK(worker_at(status, "/sub0").at("state") == "running");
    // The node's own pids, not the L4's: the workers run on the other canopyd.
    const json hb_status = hb.cli_json({"status"});
    CHECK(worker_at(status, "/hb/sub0").at("pid") == worker_at(hb_status, "/sub0").at("pid"));

    for (const std::string on : {"hb/chip0", "hb/sub0", "/hb/sub0", "sub0"}) {
        const json done = rack.cli_json({"submit", "sleep_ms", "--on", on, "--scalar", "int64:1", "--wait"});
        INFO(on << ": " << done.dump());
        CHECK(done.at("state") == "completed");
        CHECK(done.at("start_ns").get<std::uint64_t>() > 0);
    }
    // The node ran them: its own counters say so.
    CHECK(worker_at(hb.cli_json({"status"}), "/sub0").at("tasks_done").get<std::uint64_t>() == 2);
    CHECK(has_log_line(hb, {"L4 rack attached from", "session 1"}));
}

TEST_CASE("a task sent to a remote host while its only task runs long is read, runs and is answered meanwhile",
          "[remote]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    REQUIRE(eventually_running(rack, "/hb/chip0"));
    // The node reads the call after the long one once it has written a reply or, as here, when its wait for one
    // has run out (READ_DEFER): the second task runs on hb while the first still does.
    const json slow = rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:20000"});
    REQUIRE(eventually_started(rack, slow.at("id").get<std::uint64_t>()));
    rack.cli_json({"submit", "sleep_ms", "--on", "hb/chip0", "--scalar", "int64:0"});
    const auto hb_done = [&](const std::string& path) {
        return worker_at(hb.cli_json({"status"}), path).at("tasks_done").get<std::uint64_t>();
    };
    CHECK(eventually([&] { return hb_done("/chip0") == 1; }));
    CHECK(hb_done("/sub0") == 0);
    // Its result reaches the L4's clients at once, not behind the long task's frame.
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "hb/chip0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
    CHECK(task_state(rack, slow.at("id").get<std::uint64_t>()) == "running");
}

TEST_CASE("the L4 sends a remote node's tasks on its own stream: they are answered while the node's link is stopped",
          "[remote]") {
    const std::uint16_t port = free_tcp_port();
    // Neither side counts the other lost while the link is stopped: hb hears nothing from the link meanwhile.
    Daemon hb(l3_config("hb", loopback(port), "insecure",
                        {{"serve", {{"listen", loopback(port)}, {"tls", "insecure"}, {"lost_after_ms", 30000}}}}));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure", 30000)}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    const json link = worker_at(rack.cli_json({"status"}), "/hb").at("pid");
    const pid_t link_pid = link.get<pid_t>();
    REQUIRE(::kill(link_pid, SIGSTOP) == 0);
    // The link resumes once the task has its answer, or after 10 s: a task that went through the link would wait
    // for that.
    std::mutex mu;
    std::condition_variable cv;
    bool answered = false;
    std::atomic<bool> resumed_first{false};
    std::thread resume([&] {
        std::unique_lock lock(mu);
        if (!cv.wait_for(lock, std::chrono::seconds(10), [&] { return answered; })) {
            resumed_first = true;
        }
        ::kill(link_pid, SIGCONT);
    });
    const json done = rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait"});
    {
        std::lock_guard lock(mu);
        answered = true;
    }
    cv.notify_all();
    resume.join();
    CHECK(done.at("state") == "completed");
    CHECK_FALSE(resumed_first);
    // The host stayed attached through it: the same link serves the next task.
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
    CHECK(worker_at(rack.cli_json({"status"}), "/hb").at("pid") == link);
}

TEST_CASE("a remote node's task stream that breaks while its link lives loses the host until it is attached again",
          "[remote]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    const json first_link = worker_at(rack.cli_json({"status"}), "/hb").at("pid");
    const json slow = rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:30000"});
    REQUIRE(eventually([&] { return worker_at(hb.cli_json({"status"}), "/sub0").at("in_flight") == 1; }));
    break_task_connection(rack, port);
    const json failed = rack.cli_json({"wait", slow.at("id").dump()});
    CHECK(failed.at("error").at("code") == "WORKER_DIED");
    CHECK_THAT(failed.at("error").at("message").get<std::string>(),
               Catch::Contains("host hb at 127.0.0.1:" + std::to_string(port) + " lost: its task stream ended ("));
    CHECK(eventually_logged(rack, {"worker /hb (pid", "its task stream ended"}));
    // A new session, with a new link and a new stream.
    CHECK(eventually_new_link(rack, first_link));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
}

TEST_CASE("a remote node's task stream that breaks while no task is out loses the host at once", "[remote]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure", 30000)}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    REQUIRE(rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
            "completed");
    const json first_link = worker_at(rack.cli_json({"status"}), "/hb").at("pid");
    break_task_connection(rack, port);
    // No task is sent: the stream's idle Read sees the break (its lost_after of 30 s is far off).
    CHECK_THAT(eventually_last_exit(rack, "/hb", "its task stream ended"),
               Catch::Contains("host hb at 127.0.0.1:" + std::to_string(port) + " lost: its task stream ended ("));
    CHECK(eventually_new_link(rack, first_link));
}

TEST_CASE("a task for a remote node is refused by name: unknown worker, the node itself, a buffer of another host, "
          "a bad argument",
          "[remote]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));

    Output o = rack.cli({"submit", "sleep_ms", "--on", "hb/sub7", "--scalar", "int64:1", "--wait", "--json"});
    CHECK(o.rc != 0);
    CHECK(error_code_of(o.json()) == "UNKNOWN_WORKER");
    CHECK_THAT(error_message_of(o.json()),
               Catch::Contains("no worker 'hb/sub7' on remote node /hb (its workers: /hb/chip0, /hb/sub0)"));

    o = rack.cli({"submit", "sleep_ms", "--on", "hb", "--scalar", "int64:1", "--wait", "--json"});
    CHECK(error_code_of(o.json()) == "UNKNOWN_WORKER");
    CHECK_THAT(error_message_of(o.json()), Catch::Contains("is a remote node, not a worker"));

    // A buffer of the L4's host cannot be reached from hb.
    const std::string id = rack.create_buffer(4096);
    o = rack.cli({"submit", "fill", "--on", "hb/sub0", "--out", id + ":float32:16", "--scalar", "float32:1", "--wait",
                  "--json"});
    CHECK(error_code_of(o.json()) == "UNREACHABLE_BUFFER");
    CHECK_THAT(error_message_of(o.json()), Catch::Contains("is not on the host of remote node /hb"));

    // The node checks the kernel's arguments as its own workers would: sleep_ms takes an int64.
    o = rack.cli({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "float32:1", "--wait", "--json"});
    CHECK(o.rc != 0);
    CHECK(error_code_of(o.json()) == "BAD_REQUEST");
    // And the L4 and the node still serve.
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
}

TEST_CASE("a remote host that dies fails its tasks WORKER_DIED naming it, the L4 serves on, and the host is "
          "attached again when it comes back",
          "[remote]") {
    const std::uint16_t port = free_tcp_port();
    auto hb = std::make_unique<Daemon>(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    const json slow = rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:3000"});
    REQUIRE(eventually_started(rack, slow.at("id").get<std::uint64_t>()));
    REQUIRE(::kill(hb->pid(), SIGKILL) == 0);
    const json failed = rack.cli_json({"wait", slow.at("id").dump()});
    CHECK(failed.at("state") == "failed");
    CHECK(failed.at("error").at("code") == "WORKER_DIED");
    CHECK_THAT(failed.at("error").at("message").get<std::string>(),
               Catch::Contains("host hb at 127.0.0.1:" + std::to_string(port) + " lost"));
    // The rest of the L4 serves; tasks for the lost host are refused at once, naming why.
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
    const Output refused =
        rack.cli({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait", "--json"});
    CHECK(error_code_of(refused.json()) == "WORKER_DIED");
    CHECK_THAT(error_message_of(refused.json()), Catch::Contains("its link reconnects with back-off"));
    CHECK(has_log_line(rack, {"worker /hb", "host hb at 127.0.0.1:" + std::to_string(port) + " lost", "restart"}));
    // So is a buffer on the host, at once: the link has no session to ask, and the host may stay away.
    const Output create = rack.cli({"buffer", "create", "--bytes", "4096", "--on", "hb", "--json"});
    INFO(create.out + create.err);
    CHECK(error_code_of(create.json()) == "WORKER_DIED");
    CHECK_THAT(error_message_of(create.json()),
               Catch::Contains("remote node /hb is ") && Catch::Contains("its link reconnects with back-off"));

    // The host comes back (a new canopyd, so a new incarnation) and is attached again.
    hb.reset();
    Daemon hb_again(l3_config("hb", loopback(port), "insecure"));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
}

TEST_CASE("a remote host that dies fails the tasks queued for it beyond the link's mailbox too, and none reaches "
          "its next incarnation",
          "[remote]") {
    const std::uint16_t port = free_tcp_port();
    auto hb = std::make_unique<Daemon>(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    // More tasks than the link's mailbox holds (MAILBOX_FRAMES): those past it wait in the L4's queue for /hb. hb's
    // sub runs them one at a time, and none ends before hb is killed, so none of the queued ones is sent.
    const std::size_t n = canopy::MAILBOX_FRAMES + 8;
    std::vector<std::uint64_t> ids;
    for (std::size_t i = 0; i < n; ++i) {
        ids.push_back(rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:600000"})
                          .at("id")
                          .get<std::uint64_t>());
    }
    REQUIRE(eventually_started(rack, ids.front()));
    REQUIRE(::kill(hb->pid(), SIGKILL) == 0);
    std::size_t in_flight = 0;
    std::size_t queued = 0;
    for (const std::uint64_t id : ids) {
        const json failed = rack.cli_json({"wait", std::to_string(id)});
        REQUIRE(failed.at("state") == "failed");
        CHECK(failed.at("error").at("code") == "WORKER_DIED");
        const std::string why = failed.at("error").at("message").get<std::string>();
        INFO(why);
        CHECK_THAT(why, Catch::Contains("host hb at 127.0.0.1:" + std::to_string(port) + " lost"));
        in_flight += why.find("while running task") != std::string::npos ? 1U : 0U;
        queued += why.find("lost its session before the task was sent") != std::string::npos ? 1U : 0U;
    }
    CHECK(in_flight == canopy::MAILBOX_FRAMES);
    CHECK(queued == 8);
    // The host comes back and serves.
    hb.reset();
    Daemon hb_again(l3_config("hb", loopback(port), "insecure"));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
}

TEST_CASE("a read or write of a remote host's buffer queued behind a task when the host is lost fails STALE_BUFFER "
          "naming the host",
          "[remote]") {
    const std::uint16_t port = free_tcp_port();
    auto hb = std::make_unique<Daemon>(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    const std::string id = rack.cli_json({"buffer", "create", "--bytes", "4096", "--on", "hb"}).at("id");
    // A task that holds the buffer (sleep_ms touches none of its views): the read and the write wait behind it.
    const json holder = rack.cli_json(
        {"submit", "sleep_ms", "--on", "hb/sub0", "--out", id + ":uint8:4096", "--scalar", "int64:30000"});
    REQUIRE(eventually_started(rack, holder.at("id").get<std::uint64_t>()));
    write_file(rack.dir(), "in.bin", std::string(4096, 'x'));
    Output read;
    Output written;
    std::thread reader([&] {
        read = rack.cli({"buffer", "read", id, "--to", (rack.dir() / "out.bin").string(), "--json"});
    });
    std::thread writer([&] {
        written = rack.cli({"buffer", "write", id, "--from", (rack.dir() / "in.bin").string(), "--json"});
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    // Killed, hb leaves its shm objects behind, under names this host's /dev/shm shares: only the L4's
    // record of the host's loss keeps the transfers from them.
    REQUIRE(::kill(hb->pid(), SIGKILL) == 0);
    reader.join();
    writer.join();
    for (const Output* o : {&read, &written}) {
        INFO(o->out + o->err);
        REQUIRE(o->rc != 0);
        CHECK(error_code_of(o->json()) == "STALE_BUFFER");
        CHECK_THAT(error_message_of(o->json()),
                   Catch::Contains("lived on remote node /hb, whose session ended: host hb at 127.0.0.1:" +
                                   std::to_string(port) + " lost"));
    }
    CHECK(rack.cli_json({"wait", holder.at("id").dump()}).at("error").at("code") == "WORKER_DIED");
    // A copy across hosts that names the node is refused for its stale buffer.
    const std::string here = rack.create_buffer(4096);
    const Output copy = rack.cli({"submit", "copy", "--on", "hb", "--in", here + ":uint8:4096", "--out",
                                  id + ":uint8:4096", "--wait", "--json"});
    INFO(copy.out + copy.err);
    CHECK(error_code_of(copy.json()) == "STALE_BUFFER");
    CHECK_THAT(error_message_of(copy.json()),
               Catch::Contains("args[1].tensor.buffer: buffer " + id + " lived on remote node /hb"));
}

TEST_CASE("a remote host that stops answering (SIGSTOP) is lost after lost_after_ms and attached again after SIGCONT",
          "[remote]") {
    const std::uint16_t port = free_tcp_port();
    // Under the sanitizers, with other tests' daemons on the same CPUs, a live host's heartbeat can come more
    // than 500 ms late, and the host reattached after SIGCONT would be lost again.
    const std::int64_t lost_after_ms = canopy::testing::SANITIZED ? 2000 : 500;
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure", lost_after_ms)}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    const json slow = rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:3000"});
    REQUIRE(eventually_started(rack, slow.at("id").get<std::uint64_t>()));
    REQUIRE(::kill(hb.pid(), SIGSTOP) == 0);
    const auto stopped_at = std::chrono::steady_clock::now();
    const json failed = rack.cli_json({"wait", slow.at("id").dump()});
    const auto took = std::chrono::steady_clock::now() - stopped_at;
    ::kill(hb.pid(), SIGCONT);
    CHECK(failed.at("error").at("code") == "WORKER_DIED");
    // Whichever sees it first, the link's heartbeat watch or gRPC's keepalive, names the host.
    const std::string why = failed.at("error").at("message").get<std::string>();
    INFO(why);
    CHECK_THAT(why, Catch::Contains("host hb at 127.0.0.1:" + std::to_string(port) + " lost"));
    CHECK((why.find("no heartbeat for " + std::to_string(lost_after_ms) + " ms") != std::string::npos ||
           why.find("keepalive") != std::string::npos));
    CHECK(took < std::chrono::milliseconds(lost_after_ms + 4500));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
    // The node saw the new session replace the old one.
    CHECK(has_log_line(hb, {"L4 rack attached from", "session 2"}));
}

TEST_CASE("a remote host that is shut down ends its L4's session naming why, and exits cleanly with a task of the "
          "L4's still running there",
          "[remote]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    const json slow = rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:30000"});
    REQUIRE(eventually_started(rack, slow.at("id").get<std::uint64_t>()));
    // Started at the L4 means handed to the link: the task must be on hb's sub before hb stops, or hb refuses its
    // call as one that came after the stop (the task stream ends ABORTED) instead of ending the session first.
    REQUIRE(eventually([&] { return worker_at(hb.cli_json({"status"}), "/sub0").at("in_flight") == 1; }));
    // hb's server ends the session at once, then cancels the task stream it still serves, then its supervisor
    // stops the sub that runs the task: the daemon exits 0 on its own, well before stop() would kill it.
    const auto asked = std::chrono::steady_clock::now();
    CHECK(hb.stop() == 0);
    CHECK(std::chrono::steady_clock::now() - asked < std::chrono::seconds(15));
    const json failed = rack.cli_json({"wait", slow.at("id").dump()});
    CHECK(failed.at("error").at("code") == "WORKER_DIED");
    const std::string why = failed.at("error").at("message").get<std::string>();
    INFO(why);
    CHECK_THAT(why, Catch::Contains("host hb at 127.0.0.1:" + std::to_string(port) +
                                    " lost: its session ended (UNAVAILABLE: node hb is stopping)"));
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
}

TEST_CASE("a remote host shut down while a chip of it creates a buffer for its L4 answers the call and exits "
          "cleanly",
          "[remote]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack, "/hb/chip0"));
    // The chip runs a long task, so the buffer it is asked to create waits behind it, and the node's server holds
    // the L4's Buffer call on its worker thread while the node stops. The call is answered once the supervisor has
    // stopped the chip: the server's queue must still be open then (an operation started on a queue that has shut
    // down makes gRPC abort the process).
    const json slow = rack.cli_json({"submit", "sleep_ms", "--on", "hb/chip0", "--scalar", "int64:8000"});
    REQUIRE(eventually_started(rack, slow.at("id").get<std::uint64_t>()));
    // Started at the L4 means handed to the link; the Buffer call must not overtake the task on its way to hb.
    REQUIRE(eventually([&] { return worker_at(hb.cli_json({"status"}), "/chip0").at("in_flight") == 1; }));
    Output created;
    std::thread create([&] {
        created = rack.cli({"buffer", "create", "--bytes", "4096", "--on", "hb/chip0", "--backend", "vmm", "--json"});
    });
    std::this_thread::sleep_for(std::chrono::milliseconds(1000));
    const int rc = hb.stop();
    create.join();
    INFO(hb.log());
    CHECK(rc == 0);
    CHECK(has_log_line(hb, {"info stopped"}));
    CHECK_FALSE(has_log_line(hb, {"assertion failed"}));
    REQUIRE(created.rc != 0);
    CHECK(error_code_of(created.json()) == "WORKER_DIED");
    CHECK_THAT(error_message_of(created.json()),
               Catch::Contains("host hb at 127.0.0.1:" + std::to_string(port) + " lost") &&
                   Catch::Contains("node hb is stopping"));
    CHECK(rack.cli_json({"wait", slow.at("id").dump()}).at("error").at("code") == "WORKER_DIED");
    // The L4 serves on.
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
}

TEST_CASE("a remote host that stops answering for less than lost_after_ms stays attached, its task finishing",
          "[remote]") {
    // The link hears a heartbeat every lost_after / 4, and gRPC's keepalive pings a node it has not heard from for
    // lost_after / 3 and gives the ping the rest of lost_after: a host is lost only once silent for lost_after.
    // Stopped for 8.5 s of 12, it was last heard 3 s or less before the stop, which leaves half a second either
    // way: the keepalive that gave each ping lost_after / 3 lost it 8 s after it was last heard at the latest.
    const std::uint16_t port = free_tcp_port();
    const std::int64_t lost_after_ms = 12000;
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure", lost_after_ms)}));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    const json slow = rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:1000"});
    REQUIRE(eventually_started(rack, slow.at("id").get<std::uint64_t>()));
    REQUIRE(::kill(hb.pid(), SIGSTOP) == 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(8500));
    REQUIRE(::kill(hb.pid(), SIGCONT) == 0);
    const json done = rack.cli_json({"wait", slow.at("id").dump()});
    INFO(done.dump());
    CHECK(done.at("state") == "completed");
    CHECK(worker_at(rack.cli_json({"status"}), "/hb").at("state") == "running");
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
    // The same session throughout: the link was never lost.
    CHECK_FALSE(has_log_line(rack, {"host hb at 127.0.0.1:" + std::to_string(port) + " lost"}));
    CHECK_FALSE(has_log_line(hb, {"session 2"}));
}

TEST_CASE("an L4 whose remote host does not answer starts and serves, and attaches the host once it appears",
          "[remote]") {
    const std::uint16_t port = free_tcp_port();
    // A restart budget of 1: the link's attempts never spend it, so /hb is never marked dead. Each attempt must
    // hear the refused connection before lost_after passes, or it reports no answer instead; under TSan a link
    // process takes about a second to start gRPC and learn of the refusal.
    const int lost_after_ms = canopy::testing::SANITIZED ? 5000 : 500;
    Daemon rack(
        l4_config({remote_node("hb", loopback(port), "insecure", lost_after_ms)},
                  {{"supervision", {{"restart_budget", 1}, {"backoff_initial_ms", 10}, {"backoff_max_ms", 200}}}}));
    const json status = rack.cli_json({"status"});
    CHECK(worker_at(status, "/hb").at("state") != "running");
    CHECK_THAT(worker_at(status, "/hb").at("last_exit").get<std::string>(), Catch::Contains("lost"));
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
    CHECK(has_log_line(rack, {"remote node /hb is not reachable yet"}));
    // It keeps trying, 200 ms apart at most, and says so at warning once while the reason stays the same. The
    // count is awaited rather than slept for: a slow machine takes longer to start each link.
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (count_log_lines(rack, {"worker /hb", "lost: no session could be opened", "restart"}) < 5 &&
           std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    CHECK(count_log_lines(rack, {"worker /hb", "lost: no session could be opened", "restart"}) >= 5);
    CHECK(count_log_lines(rack, {"warning worker /hb", "lost: no session could be opened"}) == 1);
    const json later = worker_at(rack.cli_json({"status"}), "/hb");
    // Between attempts the node is restarting; while a new link process comes up it is starting.
    const std::string state = later.at("state").get<std::string>();
    INFO(state);
    CHECK((state == "restarting" || state == "starting"));
    CHECK(later.at("restarts").get<int>() >= 5);
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    REQUIRE(eventually_running(rack, "/hb/sub0"));
    CHECK(rack.cli_json({"submit", "sleep_ms", "--on", "hb/chip0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
}

TEST_CASE("a node whose L4 disappears keeps serving its own clients and takes the next L4's session", "[remote]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    {
        Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
        REQUIRE(eventually_running(rack, "/hb/sub0"));
        REQUIRE(::kill(rack.pid(), SIGKILL) == 0);
        REQUIRE(rack.wait_exit(std::chrono::seconds(10)).has_value());
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (!has_log_line(hb, {"L4 session 1 ended"}) && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    CHECK(has_log_line(hb, {"L4 session 1 ended", "waiting for the next L4"}));
    // The node's own socket serves throughout.
    CHECK(hb.cli_json({"submit", "sleep_ms", "--on", "sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
    Daemon rack_again(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack_again, "/hb/sub0"));
    CHECK(rack_again.cli_json({"submit", "sleep_ms", "--on", "hb/sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
    CHECK(has_log_line(hb, {"L4 rack attached from", "session 2"}));
}

TEST_CASE("a node whose serve port is taken stops at start naming the address and the reason", "[remote]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    try {
        Daemon second(l3_config("hb", loopback(port), "insecure"));
        FAIL("a second node started on a port the first one serves");
    } catch (const std::runtime_error& e) {
        CHECK_THAT(e.what(), Catch::Contains("canopyd exited during start-up"));
        CHECK_THAT(e.what(), Catch::Contains("cannot serve remote L4s on 127.0.0.1:" + std::to_string(port) +
                                             ": Address already in use"));
    }
}

TEST_CASE("the L4 refuses to restart a remote node's worker, naming the host that does", "[remote]") {
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    Daemon rack(l4_config({remote_node("hb", loopback(port), "insecure")}));
    REQUIRE(eventually_running(rack, "/hb/chip0"));
    const Output o = rack.cli({"worker", "restart", "hb/chip0", "--json"});
    CHECK(o.rc != 0);
    CHECK(error_code_of(o.json()) == "BAD_REQUEST");
    CHECK_THAT(error_message_of(o.json()),
               Catch::Contains("worker hb/chip0 runs on the host of remote node /hb and is restarted there"));
}

TEST_CASE("a node refuses an L4 of another protocol or whose name is not a node name, and calls of a session not "
          "its own, and runs a message of several calls",
          "[remote]") {
    namespace pb = canopy::remote::v1;
    const std::uint16_t port = free_tcp_port();
    Daemon hb(l3_config("hb", loopback(port), "insecure"));
    const auto channel = grpc::CreateChannel(loopback(port), grpc::InsecureChannelCredentials());
    const auto node = pb::Node::NewStub(channel);

    // The refusal of an Attach: its stream ends UNAUTHENTICATED before any event, with this message.
    const auto refusal = [&](const pb::AttachRequest& attach) {
        grpc::ClientContext context;
        const auto events = node->Attach(&context, attach);
        pb::NodeEvent event;
        CHECK_FALSE(events->Read(&event));
        const grpc::Status status = events->Finish();
        CHECK(status.error_code() == grpc::StatusCode::UNAUTHENTICATED);
        return status.error_message();
    };
    pb::AttachRequest attach;
    attach.set_l4_name("test");
    attach.set_heartbeat_ms(1000);
    attach.set_protocol(canopy::daemon::REMOTE_PROTOCOL + 1);
    CHECK(refusal(attach) == "the L4 speaks remote protocol " + std::to_string(canopy::daemon::REMOTE_PROTOCOL + 1) +
                                 ", this node " + std::to_string(canopy::daemon::REMOTE_PROTOCOL));

    attach.set_protocol(canopy::daemon::REMOTE_PROTOCOL);
    for (const std::string& name : {std::string(), std::string("rack\nforged log line"), std::string(65, 'r'),
                                    std::string(".."), std::string("sub3")}) {
        attach.set_l4_name(name);
        CHECK(refusal(attach) == "the L4 names itself with " + std::to_string(name.size()) +
                                     " bytes that are not a node name (1 to 64 of A-Z a-z 0-9 _ . -, not dots alone, "
                                     "not chipN or subN)");
    }
    CHECK(eventually_logged(hb, {"refused an L4 session from", "the L4 names itself with 0 bytes"}));
    CHECK_FALSE(has_log_line(hb, {"forged log line"}));

    attach.set_l4_name("test");
    grpc::ClientContext session_context;
    const auto events = node->Attach(&session_context, attach);
    pb::NodeEvent hello;
    REQUIRE(events->Read(&hello));
    REQUIRE(hello.has_hello());
    const std::uint64_t session = hello.hello().session();

    // One message of three calls, the second with a blob that is not TaskArgs: each answered by its call id.
    canopy::TaskArgs args;
    args.scalars.push_back(canopy::ScalarArg::i64(0));
    const std::vector<std::byte> blob = canopy::encode_task_args(args);
    const canopy::LaunchConfig launch{};
    pb::TaskCalls calls;
    for (std::uint64_t id = 1; id <= 3; ++id) {
        pb::TaskCall* call = calls.add_calls();
        call->set_session(session);
        call->set_call_id(id);
        call->set_kernel("sleep_ms");
        call->set_worker("sub0");
        call->set_args(id == 2 ? std::string("not a blob")
                               : std::string(reinterpret_cast<const char*>(blob.data()), blob.size()));
        call->set_launch(reinterpret_cast<const char*>(&launch), sizeof launch);
    }
    {
        grpc::ClientContext context;
        const auto tasks = node->Tasks(&context);
        REQUIRE(tasks->Write(calls));
        std::map<std::uint64_t, pb::TaskReply> replies;
        pb::TaskReplies got;
        while (replies.size() < 3 && tasks->Read(&got)) {
            for (const pb::TaskReply& reply : got.replies()) {
                replies[reply.call_id()] = reply;
            }
        }
        REQUIRE(replies.size() == 3);
        CHECK(replies[1].code() == static_cast<std::uint32_t>(canopy::ErrorCode::OK));
        CHECK(replies[3].code() == static_cast<std::uint32_t>(canopy::ErrorCode::OK));
        CHECK(replies[2].code() != static_cast<std::uint32_t>(canopy::ErrorCode::OK));
        CHECK(replies[2].message().starts_with("task.args: "));
        tasks->WritesDone();
        CHECK(tasks->Finish().ok());
    }

    // A message whose last call names another session ends the stream ABORTED, naming that session.
    calls.mutable_calls(2)->set_session(session + 7);
    {
        grpc::ClientContext context;
        const auto tasks = node->Tasks(&context);
        (void)tasks->Write(calls);
        pb::TaskReplies got;
        while (tasks->Read(&got)) {
        }
        const grpc::Status status = tasks->Finish();
        CHECK(status.error_code() == grpc::StatusCode::ABORTED);
        CHECK_THAT(status.error_message(), Catch::StartsWith("session " + std::to_string(session + 7) +
                                                             " is not the node's current L4 session"));
    }
    session_context.TryCancel();
    pb::NodeEvent rest;
    while (events->Read(&rest)) {
    }
    (void)events->Finish();
    // hb serves on.
    CHECK(hb.cli_json({"submit", "sleep_ms", "--on", "sub0", "--scalar", "int64:0", "--wait"}).at("state") ==
          "completed");
}
