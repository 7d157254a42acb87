// run, submit and wait: task outcomes, polling and progress.

#include "cli/graph_run.h"
#include "tests/cli/fake_daemon.h"

#include <catch2/catch.hpp>

using namespace canopy::cli;
using namespace canopy::cli::testing;
using nlohmann::json;

namespace {

json task(const std::string& name, int id, const std::string& state) {
    json t = {{"name", name},   {"id", id},          {"kernel", "fill"}, {"on", "chip0"},
              {"state", state}, {"submitted_ns", 1}, {"start_ns", 0},    {"end_ns", 0}};
    if (state == "failed" || state == "rejected") {
        t["error"] = {{"code", state == "failed" ? "KERNEL_FAILED" : "INVALID_TENSOR"},
                      {"message", name + " went wrong"}};
    }
    return t;
}

// A daemon running a graph of three tasks: `run` queues them; each `tasks` listing finishes one more;
// task 2 fails; task 1 has dropped out of the listing once finished, so only `wait` reports it.
struct GraphDaemon {
    int listings = 0;
    FakeDaemon daemon{[this](const json& request) { return serve(request); }};
    std::string graph = write_file(daemon.dir(), "graph.json", "{\"tasks\": [{}, {}, {}]}");

    FakeReply serve(const json& request) {
        const std::string op = request["op"];
        if (op == "run") {
            return ok({{"tasks", {task("a", 1, "queued"), task("b", 2, "queued"), task("c", 3, "queued")}}});
        }
        if (op == "wait") {
            return ok({{"task", task("a", 1, "completed")}});
        }
        ++listings;
        json list = json::array();
        list.push_back(task("b", 2, listings >= 2 ? "failed" : "running"));
        list.push_back(task("c", 3, listings >= 3 ? "completed" : "queued"));
        return ok({{"tasks", list}});
    }

    std::vector<std::string> ops() const {
        std::vector<std::string> out;
        for (const auto& r : daemon.requests()) {
            out.push_back(r["op"]);
        }
        return out;
    }
};

} // namespace

TEST_CASE("run --wait polls until every task has finished and prints the final table", "[cli]") {
    GraphDaemon g;
    const CliRun r = run({"run", g.graph, "--wait"}, g.daemon.socket_path());
    CHECK(r.rc == 1);
    CHECK(g.ops() == std::vector<std::string>{"run", "tasks", "wait", "tasks", "tasks"});
    CHECK(g.daemon.requests()[2] == json{{"op", "wait"}, {"id", 3}, {"task_id", 1}});
    CHECK(r.out == "ID  NAME  KERNEL  ON     STATE      TIME  ERROR\n"
                   " 1  a     fill    chip0  completed     -\n"
                   " 2  b     fill    chip0  failed        -  KERNEL_FAILED: b went wrong\n"
                   " 3  c     fill    chip0  completed     -\n");
    CHECK(r.err == "canopy: KERNEL_FAILED: task b (id 2) failed: b went wrong\n");
}

TEST_CASE("run --wait --json prints every task's final state with errors", "[cli]") {
    GraphDaemon g;
    const CliRun r = run({"run", g.graph, "--wait", "--json"}, g.daemon.socket_path());
    CHECK(r.rc == 1);
    const json out = json::parse(r.out);
    REQUIRE(out["tasks"].size() == 3);
    CHECK(out["tasks"][0]["state"] == "completed");
    CHECK(out["tasks"][1]["state"] == "failed");
    CHECK(out["tasks"][1]["error"] == json{{"code", "KERNEL_FAILED"}, {"message", "b went wrong"}});
    for (const auto& t : out["tasks"]) {
        CHECK(t.contains("name"));
        CHECK(t.contains("id"));
    }
}

TEST_CASE("run --wait draws progress on a terminal once the graph runs long enough", "[cli]") {
    GraphDaemon g;
    Environment env = test_env();
    env.stderr_is_tty = true;
    env.progress_after = std::chrono::milliseconds(0);
    const CliRun r = run({"run", g.graph, "--wait"}, g.daemon.socket_path(), env);
    CHECK(r.err.find("\r[1/3] done, 0 failed\r[2/3] done, 1 failed\r[3/3] done, 1 failed\n") == 0);
}

TEST_CASE("run --wait draws no progress when stderr is not a terminal or the graph is quick", "[cli]") {
    GraphDaemon g;
    Environment env = test_env();
    env.stderr_is_tty = false;
    env.progress_after = std::chrono::milliseconds(0);
    CHECK(run({"run", g.graph, "--wait"}, g.daemon.socket_path(), env).err.find('\r') == std::string::npos);
    GraphDaemon quick;
    env.stderr_is_tty = true;
    env.progress_after = std::chrono::hours(1);
    CHECK(run({"run", quick.graph, "--wait"}, quick.daemon.socket_path(), env).err.find('\r') == std::string::npos);
}

TEST_CASE("progress lines count finished and failed tasks", "[cli]") {
    CHECK(progress_line(json::array()) == "\r[0/0] done, 0 failed");
    CHECK(progress_line({task("a", 1, "completed"), task("b", 2, "running"), task("c", 3, "rejected")}) ==
          "\r[2/3] done, 1 failed");
}

TEST_CASE("run without --wait prints the queued tasks and exits 0", "[cli]") {
    GraphDaemon g;
    const CliRun r = run({"run", g.graph}, g.daemon.socket_path());
    CHECK(r.rc == 0);
    CHECK(g.ops() == std::vector<std::string>{"run"});
    CHECK(r.out.find(" 3  c     fill    chip0  queued") != std::string::npos);
    CHECK(r.err.empty());
}

TEST_CASE("a rejected graph exits 1 naming the task that was rejected on its own", "[cli]") {
    FakeDaemon daemon([](const json&) {
        json other = task("a", 1, "rejected");
        other["error"] = {{"code", "BAD_REQUEST"}, {"message", "not run: task b of this graph was rejected"}};
        return ok({{"tasks", {other, task("b", 2, "rejected")}}});
    });
    const std::string graph = write_file(daemon.dir(), "g.json", "{\"tasks\": [{}, {}]}");
    const CliRun r = run({"run", graph, "--wait", "--json"}, daemon.socket_path());
    CHECK(r.rc == 1);
    CHECK(daemon.requests().size() == 1);
    CHECK(r.err == "canopy: INVALID_TENSOR: task b (id 2) rejected: b went wrong\n"
                   "canopy: 2 of 2 tasks did not complete\n");
    const json out = json::parse(r.out);
    CHECK(out["tasks"][0]["error"]["code"] == "BAD_REQUEST");
    CHECK(out["tasks"][1]["state"] == "rejected");
}

TEST_CASE("run --wait fails when the daemon's reply has no task list", "[cli]") {
    FakeDaemon daemon([](const json&) { return ok({{"tasks", {{{"name", "x"}}}}}); });
    const std::string graph = write_file(daemon.dir(), "g.json", "{\"tasks\": [{}]}");
    const CliRun r = run({"run", graph, "--wait"}, daemon.socket_path());
    CHECK(r.rc == 1);
    CHECK(r.err == "canopy: PROTOCOL_ERROR: the reply to \"run\" lists a task without an id\n");
}

TEST_CASE("submit --wait of a task that fails exits 1 with its error", "[cli]") {
    FakeDaemon daemon([](const json&) { return ok({{"task", task("segfault", 9, "failed")}}); });
    const CliRun r = run({"submit", "segfault", "--on", "sub0", "--wait"}, daemon.socket_path());
    CHECK(r.rc == 1);
    CHECK(r.err == "canopy: KERNEL_FAILED: task segfault (id 9) failed: segfault went wrong\n");
    CHECK(r.out.find(" 9  segfault  fill    chip0  failed") != std::string::npos);
    const CliRun j = run({"submit", "segfault", "--on", "sub0", "--wait", "--json"}, daemon.socket_path());
    CHECK(j.rc == 1);
    CHECK(json::parse(j.out) == task("segfault", 9, "failed"));
}

TEST_CASE("submit prints the task and exits 0 while it is queued", "[cli]") {
    FakeDaemon daemon([](const json&) { return ok({{"task", task("fill", 4, "queued")}}); });
    const CliRun r =
        run({"submit", "fill", "--on", "chip0", "--out", "B:float32:4", "--scalar", "float32:1"}, daemon.socket_path());
    CHECK(r.rc == 0);
    CHECK(r.out == "ID  NAME  KERNEL  ON     STATE   TIME\n"
                   " 4  fill  fill    chip0  queued     -\n");
}

TEST_CASE("wait prints the finished task and exits 1 for a failed one", "[cli]") {
    FakeDaemon done([](const json&) { return ok({{"task", task("a", 5, "completed")}}); });
    const CliRun r = run({"wait", "5", "--json"}, done.socket_path());
    CHECK(r.rc == 0);
    CHECK(json::parse(r.out)["state"] == "completed");
    FakeDaemon failed([](const json&) { return ok({{"task", task("a", 5, "failed")}}); });
    CHECK(run({"wait", "5"}, failed.socket_path()).rc == 1);
}
