// run, submit, wait and cancel: task outcomes and progress.

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

// A daemon running a graph of three tasks: `run` queues them; `run` with "wait" replies with their final states
// (task 2 failed), after two progress frames when "progress" is asked for.
struct GraphDaemon {
    FakeDaemon daemon{[this](const json& request) { return serve(request); }};
    std::string graph = write_file(daemon.dir(), "graph.json", "{\"tasks\": [{}, {}, {}]}");

    FakeReply serve(const json& request) {
        if (!request.value("wait", false)) {
            return ok({{"tasks", {task("a", 1, "queued"), task("b", 2, "queued"), task("c", 3, "queued")}}});
        }
        const json id = request["id"];
        std::string bytes;
        if (request.value("progress", false)) {
            bytes += frame(json{{"id", id}, {"progress", {{"done", 1}, {"failed", 0}, {"total", 3}}}}.dump());
            bytes += frame(json{{"id", id}, {"progress", {{"done", 2}, {"failed", 1}, {"total", 3}}}}.dump());
        }
        const json tasks = {task("a", 1, "completed"), task("b", 2, "failed"), task("c", 3, "completed")};
        bytes += frame(json{{"id", id}, {"ok", true}, {"tasks", tasks}}.dump());
        return raw(bytes);
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

TEST_CASE("run --wait is one request whose reply holds every task's final state", "[cli]") {
    GraphDaemon g;
    const CliRun r = run({"run", g.graph, "--wait"}, g.daemon.socket_path());
    CHECK(r.rc == 1);
    REQUIRE(g.ops() == std::vector<std::string>{"run"});
    CHECK(g.daemon.requests()[0]["wait"] == true);
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

TEST_CASE("run --wait draws the daemon's progress frames on a terminal once the graph runs long enough", "[cli]") {
    GraphDaemon g;
    Environment env = test_env();
    env.stderr_is_tty = true;
    env.progress_after = std::chrono::milliseconds(0);
    const CliRun r = run({"run", g.graph, "--wait"}, g.daemon.socket_path(), env);
    CHECK(g.daemon.requests()[0]["progress"] == true);
    CHECK(r.err.find("\r[1/3] done, 0 failed\r[2/3] done, 1 failed\n") == 0);
}

TEST_CASE("run --wait draws no progress when stderr is not a terminal or the graph is quick", "[cli]") {
    GraphDaemon g;
    Environment env = test_env();
    env.stderr_is_tty = false;
    env.progress_after = std::chrono::milliseconds(0);
    CHECK(run({"run", g.graph, "--wait"}, g.daemon.socket_path(), env).err.find('\r') == std::string::npos);
    CHECK(g.daemon.requests()[0]["progress"] == false);
    GraphDaemon quick;
    env.stderr_is_tty = true;
    env.progress_after = std::chrono::hours(1);
    CHECK(run({"run", quick.graph, "--wait"}, quick.daemon.socket_path(), env).err.find('\r') == std::string::npos);
}

TEST_CASE("progress lines count finished and failed tasks", "[cli]") {
    CHECK(progress_line(json::object()) == "\r[0/0] done, 0 failed");
    CHECK(progress_line(json::object({{"done", 2}, {"failed", 1}, {"total", 3}})) == "\r[2/3] done, 1 failed");
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

TEST_CASE("wait on several tasks sends their ids and prints their table", "[cli]") {
    FakeDaemon daemon([](const json&) {
        return ok({{"tasks", {task("a", 5, "completed"), task("b", 6, "completed")}}, {"timed_out", false}});
    });
    const CliRun r = run({"wait", "5", "6", "--timeout", "30s"}, daemon.socket_path());
    CHECK(r.rc == 0);
    CHECK(daemon.requests()[0]["task_ids"] == json{5, 6});
    CHECK(daemon.requests()[0]["timeout_ms"] == 30000);
    CHECK(r.out.find(" 6  b     fill    chip0  completed") != std::string::npos);
}

TEST_CASE("wait that timed out exits 1 saying how many tasks had not finished", "[cli]") {
    FakeDaemon daemon([](const json&) {
        return ok({{"tasks", {task("a", 5, "completed"), task("b", 6, "running")}}, {"timed_out", true}});
    });
    const CliRun r = run({"wait", "5", "6", "--timeout", "500ms"}, daemon.socket_path());
    CHECK(r.rc == 1);
    CHECK(r.err == "canopy: TIMEOUT: 1 of 2 tasks had not finished after 500ms\n");
}

TEST_CASE("wait refuses a bad timeout before it connects", "[cli]") {
    FakeDaemon daemon([](const json&) { return ok(); });
    for (const char* bad : {"5x", "-1s", "", "25h", "1.5s"}) {
        INFO(bad);
        const CliRun r = run({"wait", "5", "--timeout", bad}, daemon.socket_path());
        CHECK(r.rc == 2);
        CHECK_THAT(r.err, Catch::Contains("--timeout"));
    }
    CHECK(daemon.requests().empty());
}

TEST_CASE("cancel reports each task's fate and exits 1 when one was running", "[cli]") {
    FakeDaemon daemon([](const json&) {
        json a = task("a", 5, "failed");
        a["cancel"] = "cancelled";
        json b = task("b", 6, "completed");
        b["cancel"] = "finished";
        json c = task("c", 7, "running");
        c["cancel"] = "running";
        return ok({{"tasks", {a, b, c}}});
    });
    const CliRun r = run({"cancel", "5", "6", "7"}, daemon.socket_path());
    CHECK(daemon.requests()[0]["task_ids"] == json{5, 6, 7});
    CHECK(r.rc == 1);
    CHECK(r.out == "cancelled task a (id 5)\ntask b (id 6) had already finished (completed)\n");
    CHECK(r.err == "canopy: task c (id 7) is running; its worker cannot stop it, so it will finish\n");
    const CliRun q = run({"cancel", "-q", "5", "6", "7"}, daemon.socket_path());
    CHECK(q.out == "5\n");
}
