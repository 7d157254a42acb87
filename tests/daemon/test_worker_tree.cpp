// The worker tree a supervisor sends up a level (daemon/json_codec.h): written by workers_to_json and read back
// exactly, and, since the reader takes text another process wrote (a nested node, a remote host), every value a
// field cannot hold refused naming the entry and the field.
#include "daemon/json_codec.h"
#include "daemon/request_error.h"

#include <catch2/catch.hpp>
#include <string>
#include <vector>

using namespace canopy;
using namespace canopy::daemon;

namespace {

std::vector<WorkerStatus> sample_tree() {
    WorkerStatus chip;
    chip.path = "/chip0";
    chip.kind = "chip";
    chip.backend = "cuda";
    chip.device = 7;
    chip.pid = 4242;
    chip.state = WorkerState::RUNNING;
    chip.restarts = 3;
    chip.tasks_done = UINT64_MAX;
    chip.tasks_failed = 12;
    chip.uptime_s = 1234.5678;
    chip.last_exit = "killed by signal 9 \"SIGKILL\"\n";
    WorkerStatus sub;
    sub.path = "/sub0";
    sub.kind = "sub";
    sub.state = WorkerState::RESTARTING;
    sub.last_exit = "caf\xc3\xa9";
    WorkerStatus node;
    node.path = "/n1";
    node.kind = "node";
    node.pid = -1;
    node.state = WorkerState::DEAD;
    return {chip, sub, node};
}

void check_same_worker(const WorkerStatus& a, const WorkerStatus& b) {
    CHECK(a.path == b.path);
    CHECK(a.kind == b.kind);
    CHECK(a.backend == b.backend);
    CHECK(a.device == b.device);
    CHECK(a.pid == b.pid);
    CHECK(a.state == b.state);
    CHECK(a.restarts == b.restarts);
    CHECK(a.tasks_done == b.tasks_done);
    CHECK(a.tasks_failed == b.tasks_failed);
    CHECK(a.uptime_s == b.uptime_s);
    CHECK(a.last_exit == b.last_exit);
}

std::string tree_refusal(const std::string& text) {
    try {
        workers_from_json(text);
    } catch (const RequestError& e) {
        CHECK(e.code() == ErrorCode::BAD_REQUEST);
        return e.what();
    }
    FAIL("accepted: " << text);
    return {};
}

// One worker entry: a running sub with `fields` merged in (as JSON text after the required ones).
std::string tree_entry(const std::string& fields) {
    return R"([{"path": "/sub0", "state": "running")" + (fields.empty() ? "" : ", " + fields) + "}]";
}

} // namespace

TEST_CASE("a worker tree reads back exactly what workers_to_json wrote", "[json][tree]") {
    const std::vector<WorkerStatus> workers = sample_tree();
    const std::vector<WorkerStatus> back = workers_from_json(workers_to_json(workers));
    REQUIRE(back.size() == workers.size());
    for (std::size_t i = 0; i < workers.size(); ++i) {
        INFO("worker " << i);
        check_same_worker(back[i], workers[i]);
    }
    CHECK(workers_from_json("[]").empty());
}

TEST_CASE("a worker entry needs a path and a state, takes the other fields when given, and ignores unknown keys",
          "[json][tree]") {
    const std::vector<WorkerStatus> w = workers_from_json(tree_entry(R"("queued": 5, "future_field": "x")"));
    REQUIRE(w.size() == 1);
    CHECK(w[0].path == "/sub0");
    CHECK(w[0].state == WorkerState::RUNNING);
    CHECK(w[0].pid == -1);
    CHECK(w[0].device == 0);
    CHECK(w[0].kind.empty());
    CHECK(tree_refusal(R"([{"state": "running"}])") == "[0]: missing \"path\"");
    CHECK(tree_refusal(R"([{"path": "/sub0"}])") == "[0]: missing \"state\"");
    CHECK(tree_refusal(R"([{"path": "", "state": "running"}])") == "[0].path: empty");
    CHECK(tree_refusal(R"([{"path": "/a", "state": "running"}, {"path": "/b", "state": "asleep"}])") ==
          "[1].state: unknown state \"asleep\"");
}

TEST_CASE("a worker tree that is not an array of objects is refused", "[json][tree]") {
    CHECK_THAT(tree_refusal("[{\"path\": "), Catch::StartsWith("not JSON: "));
    CHECK_THAT(tree_refusal(""), Catch::StartsWith("not JSON: "));
    CHECK(tree_refusal(R"({"path": "/sub0"})") == "expected an array of workers, got object");
    CHECK(tree_refusal("[1]") == "[0]: expected a worker object, got number");
    CHECK(tree_refusal(tree_entry(R"("kind": "sub", "kind": "chip")")) == "/0: key \"kind\" given twice");
    CHECK_THAT(tree_refusal(tree_entry(R"("last_exit": ["a"])")),
               Catch::StartsWith("/0/last_exit: a container inside a worker"));
    CHECK_THAT(tree_refusal("[[[[[[[[[[]]]]]]]]]]"), Catch::StartsWith("/0/0: a container inside a worker"));
}

TEST_CASE("a worker field given a value it cannot hold is refused naming the field, never cast", "[json][tree]") {
    CHECK(tree_refusal(tree_entry(R"("kind": 5)")) == "[0].kind: expected a string");
    CHECK(tree_refusal(tree_entry(R"("last_exit": null)")) == "[0].last_exit: expected a string");
    CHECK(tree_refusal(tree_entry(R"("pid": 1e300)")) == "[0].pid: 1e+300 is out of range for int64");
    CHECK(tree_refusal(tree_entry(R"("pid": 1.5)")) == "[0].pid: expected an integer, got 1.5");
    CHECK(tree_refusal(tree_entry(R"("pid": -2)")) == "[0].pid: -2 is out of range -1..2147483647");
    CHECK(tree_refusal(tree_entry(R"("pid": 2147483648)")) == "[0].pid: 2147483648 is out of range -1..2147483647");
    CHECK(tree_refusal(tree_entry(R"("device": -1)")) == "[0].device: -1 is out of range 0..4294967295");
    CHECK(tree_refusal(tree_entry(R"("device": 4294967296)")) ==
          "[0].device: 4294967296 is out of range 0..4294967295");
    CHECK(tree_refusal(tree_entry(R"("restarts": "3")")) == "[0].restarts: expected an integer, got \"3\"");
    CHECK(tree_refusal(tree_entry(R"("tasks_done": 18446744073709551616)")) ==
          "[0].tasks_done: 1.8446744073709552e+19 is out of range 0..18446744073709551615");
    CHECK(tree_refusal(tree_entry(R"("tasks_failed": -1)")) ==
          "[0].tasks_failed: -1 is out of range 0..18446744073709551615");
    CHECK(tree_refusal(tree_entry(R"("uptime_s": -0.5)")) == "[0].uptime_s: -0.5 is negative");
    CHECK(tree_refusal(tree_entry(R"("uptime_s": "1")")) == "[0].uptime_s: expected a number, got \"1\"");
    const std::vector<WorkerStatus> edge =
        workers_from_json(tree_entry(R"("pid": 2147483647, "device": 4294967295, "uptime_s": 0, "restarts": 0)"));
    CHECK(edge.at(0).pid == 2147483647);
    CHECK(edge.at(0).device == 4294967295u);
}

TEST_CASE("a worker tree is written even when a text holds bytes that are not UTF-8, which become U+FFFD",
          "[json][tree]") {
    // A last exit cut at a message's byte limit can end inside a multi-byte character.
    WorkerStatus w;
    w.path = "/chip0";
    w.state = WorkerState::RESTARTING;
    w.last_exit = "fatal: cannot read /etc/canopy/caf\xc3";
    w.kind = "chip\xff";
    const std::vector<WorkerStatus> back = workers_from_json(workers_to_json({w}));
    REQUIRE(back.size() == 1);
    CHECK(back[0].last_exit == "fatal: cannot read /etc/canopy/caf\xef\xbf\xbd");
    CHECK(back[0].kind == "chip\xef\xbf\xbd");
}

namespace {

std::vector<WorkerStatus> workers_at(const std::vector<std::string>& paths) {
    std::vector<WorkerStatus> workers(paths.size());
    for (std::size_t i = 0; i < paths.size(); ++i) {
        workers[i].path = paths[i];
    }
    return workers;
}

std::string level3_refusal(const std::vector<std::string>& paths) {
    try {
        check_level3_tree(workers_at(paths));
    } catch (const RequestError& e) {
        CHECK(e.code() == ErrorCode::BAD_REQUEST);
        return e.what();
    }
    FAIL("accepted as a level-3 tree");
    return {};
}

} // namespace

TEST_CASE("a level-3 node's tree holds its chips and subs, each once, as the node numbers them", "[worker_tree]") {
    CHECK_NOTHROW(check_level3_tree({}));
    CHECK_NOTHROW(check_level3_tree(workers_at({"/chip0", "/chip1", "/sub0", "/sub10", "/sub4294967295"})));
    const std::string not_worker = " is not a chip or sub of a level-3 node (/chipN, /subN)";
    CHECK(level3_refusal({"/chip0", "/sub0/../chip0"}) == R"([1].path: "/sub0/../chip0")" + not_worker);
    CHECK(level3_refusal({"sub0"}) == R"([0].path: "sub0")" + not_worker);
    CHECK(level3_refusal({"/chip01"}) == R"([0].path: "/chip01")" + not_worker);
    CHECK(level3_refusal({"/chip"}) == R"([0].path: "/chip")" + not_worker);
    CHECK(level3_refusal({"/sub-1"}) == R"([0].path: "/sub-1")" + not_worker);
    CHECK(level3_refusal({"/sub12345678901"}) == R"([0].path: "/sub12345678901")" + not_worker);
    CHECK(level3_refusal({"/n1"}) == R"([0].path: "/n1")" + not_worker);
    CHECK(level3_refusal({"/n1/chip0"}) == R"([0].path: "/n1/chip0")" + not_worker);
    CHECK(level3_refusal({"/sub0\n/chip0"}) == R"([0].path: "/sub0\u000a/chip0")" + not_worker);
    CHECK(level3_refusal({"/sub0", "/chip0", "/sub0"}) == R"([2].path: "/sub0" is given twice (also at [0]))");
    const std::string longer = "/" + std::string(200, 'x');
    CHECK(level3_refusal({longer}) == "[0].path: \"/" + std::string(63, 'x') + "\"... (201 bytes)" + not_worker);
}
