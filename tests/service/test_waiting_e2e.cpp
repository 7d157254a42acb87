// Waiting that cannot miss, against a real daemon: `run --wait` and `submit --wait` are answered by the daemon
// when the work has finished, progress frames stream before the reply, `wait` takes several ids and a
// timeout, `cancel` fails queued tasks with CANCELLED, and finished-task history is sized in the config and
// not spent by buffer transfers.

#include "fixture.h"
#include "helpers.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <thread>

using namespace canopy::e2e;
using nlohmann::json;

namespace {

// A graph of `n` sleep_ms(0) tasks spread over the workers, none touching a buffer.
json noop_graph(std::size_t n, const std::vector<std::string>& workers) {
    json tasks = json::array();
    for (std::size_t i = 0; i < n; ++i) {
        tasks.push_back(sleep_task("t" + std::to_string(i), workers[i % workers.size()], 0));
    }
    return {{"tasks", tasks}};
}

} // namespace

TEST_CASE("run --wait of 5000 tasks while another client floods the daemon reports every task completed",
          "[service][waiting]") {
    Daemon d(e2e_config(1, 2));
    // The flood: another connection keeps submitting graphs of 500 no-op tasks without waiting, so finished
    // tasks pass through the daemon's history far faster than the graph below finishes.
    std::atomic<bool> flooding{true};
    std::atomic<std::size_t> flood_graphs{0};
    std::thread flood([&] {
        RawClient c(d.socket());
        const json graph = noop_graph(500, {"sub0", "sub1"});
        while (flooding) {
            const json reply = c.request({{"op", "run"}, {"graph", graph}, {"wait", false}});
            if (!reply.value("ok", false)) {
                return;
            }
            ++flood_graphs;
        }
    });
    struct Join {
        std::atomic<bool>& flag;
        std::thread& t;
        ~Join() {
            flag = false;
            t.join();
        }
    } join{flooding, flood};
    TempDir files;
    const auto path = write_file(files.path, "graph.json", noop_graph(5000, {"chip0", "sub0", "sub1"}).dump());
    const Output o = d.cli({"run", path, "--wait", "--json"});
    INFO(o.err);
    REQUIRE(o.rc == 0);
    const json out = o.json();
    REQUIRE(out.at("tasks").size() == 5000);
    for (const auto& t : out.at("tasks")) {
        REQUIRE(t.at("state") == "completed");
    }
    CHECK(flood_graphs > 0);
}

TEST_CASE("a waited run with progress gets progress frames before its reply", "[service][waiting]") {
    Daemon d(e2e_config(1, 0));
    const std::string buffer = d.create_buffer(64);
    // Six tasks that write one buffer run one after another: about 600 ms, so frames come every 250 ms.
    json tasks = json::array();
    for (int i = 0; i < 6; ++i) {
        tasks.push_back(sleep_task("s" + std::to_string(i), "chip0", 100, {tensor_arg(buffer, "output", {16})}));
    }
    RawClient c(d.socket());
    c.send_frame(
        json{{"op", "run"}, {"id", 7}, {"graph", {{"tasks", tasks}}}, {"wait", true}, {"progress", true}}.dump());
    std::vector<json> progress;
    std::optional<json> reply;
    while (!reply) {
        auto frame = c.read_reply(std::chrono::milliseconds(10000));
        REQUIRE(frame);
        CHECK(frame->at("id") == 7);
        if (frame->contains("ok")) {
            reply = frame;
        } else {
            progress.push_back(frame->at("progress"));
        }
    }
    CHECK(reply->at("ok") == true);
    REQUIRE(reply->at("tasks").size() == 6);
    REQUIRE(!progress.empty());
    std::uint64_t last = 0;
    for (const auto& p : progress) {
        CHECK(p.at("total") == 6);
        CHECK(p.at("failed") == 0);
        CHECK(p.at("done").get<std::uint64_t>() >= last);
        CHECK(p.at("done").get<std::uint64_t>() < 6);
        last = p.at("done").get<std::uint64_t>();
    }
}

TEST_CASE("wait takes several ids and gives up at its timeout with the states as they are", "[service][waiting]") {
    Daemon d(e2e_config(1, 1));
    const json quick = d.cli_json({"submit", "sleep_ms", "--on", "sub0", "--scalar", "int64:0", "--wait"});
    const json slow = d.cli_json({"submit", "sleep_ms", "--on", "chip0", "--scalar", "int64:3000"});
    const std::string quick_id = quick.at("id").dump();
    const std::string slow_id = slow.at("id").dump();
    Output o = d.cli({"wait", quick_id, slow_id, "--timeout", "200ms", "--json"});
    CHECK(o.rc == 1);
    CHECK_THAT(o.err, Catch::Contains("TIMEOUT: 1 of 2 tasks had not finished after 200ms"));
    json out = o.json();
    CHECK(out.at("timed_out") == true);
    CHECK(out.at("tasks").at(0).at("state") == "completed");
    CHECK(out.at("tasks").at(1).at("state") == "running");
    o = d.cli({"wait", quick_id, slow_id, "--json"});
    CHECK(o.rc == 0);
    out = o.json();
    CHECK(out.at("timed_out") == false);
    CHECK(out.at("tasks").at(1).at("state") == "completed");
    // Unknown ids and malformed lists are refused before anything waits.
    o = d.cli({"wait", quick_id, "999999", "--json"});
    CHECK(o.rc == 1);
    CHECK(error_code_of(o.json()) == "BAD_REQUEST");
    CHECK_THAT(error_message_of(o.json()), Catch::Contains("no task 999999"));
    RawClient c(d.socket());
    for (const json& bad :
         {json{{"op", "wait"}, {"task_ids", json::array()}}, json{{"op", "wait"}, {"task_ids", {1, 1}}},
          json{{"op", "wait"}, {"task_ids", {"x"}}}, json{{"op", "wait"}, {"task_id", 1}, {"task_ids", {1}}},
          json{{"op", "wait"}, {"task_id", 1}, {"timeout_ms", 86'400'001}}}) {
        INFO(bad.dump());
        const json reply = c.request(bad);
        CHECK(reply.at("ok") == false);
        CHECK(reply.at("error").at("code") == "BAD_REQUEST");
    }
}

TEST_CASE("cancel fails a queued task and its dependents, and says a running one will finish", "[service][waiting]") {
    Daemon d(e2e_config(1, 0));
    const std::string buffer = d.create_buffer(64);
    const json view = tensor_arg(buffer, "inout", {16});
    TempDir files;
    const json graph = {{"tasks",
                         {sleep_task("running", "chip0", 2000, {view}), sleep_task("queued", "chip0", 0, {view}),
                          sleep_task("dependent", "chip0", 0, {view})}}};
    const json queued = d.cli_json({"run", write_file(files.path, "g.json", graph.dump())});
    const std::string first = task_named(queued, "running").at("id").dump();
    const std::string second = task_named(queued, "queued").at("id").dump();
    const std::string third = task_named(queued, "dependent").at("id").dump();
    REQUIRE(wait_task_started(d, "running") == "running");
    const Output o = d.cli({"cancel", second, first, "--json"});
    CHECK(o.rc == 1); // the running one could not be stopped
    const json out = o.json();
    CHECK(out.at("tasks").at(0).at("cancel") == "cancelled");
    CHECK(out.at("tasks").at(0).at("error").at("code") == "CANCELLED");
    CHECK_THAT(out.at("tasks").at(0).at("error").at("message").get<std::string>(), Catch::Contains("cancelled by uid"));
    CHECK(out.at("tasks").at(1).at("cancel") == "running");
    const json waited = d.cli({"wait", first, second, third, "--json"}).json();
    CHECK(waited.at("tasks").at(0).at("state") == "completed");
    CHECK(waited.at("tasks").at(1).at("error").at("code") == "CANCELLED");
    CHECK(waited.at("tasks").at(2).at("error").at("code") == "DEPENDENCY_FAILED");
    // A finished task is reported, not changed; an unknown one refuses the whole request.
    const json again = d.cli({"cancel", first, "--json"}).json();
    CHECK(again.at("tasks").at(0).at("cancel") == "finished");
    CHECK(again.at("tasks").at(0).at("state") == "completed");
    const Output unknown = d.cli({"cancel", "424242", "--json"});
    CHECK(unknown.rc == 1);
    CHECK(error_code_of(unknown.json()) == "BAD_REQUEST");
    CHECK_THAT(d.log(), Catch::Contains("cancel requested by uid"));
}

TEST_CASE("finished-task history is sized by control.task_history and not spent by buffer transfers",
          "[service][waiting]") {
    Daemon d(e2e_config(1, 0, {{"control", {{"task_history", 3}}}}));
    const std::string buffer = d.create_buffer(64);
    const json first = d.cli_json({"submit", "sleep_ms", "--on", "chip0", "--scalar", "int64:0", "--wait"});
    TempDir files;
    const auto in = write_file(files.path, "in.bin", std::string(64, 'x'));
    for (int i = 0; i < 10; ++i) {
        REQUIRE(d.cli({"buffer", "write", buffer, "--from", in}).rc == 0);
    }
    CHECK(d.cli({"wait", first.at("id").dump()}).rc == 0); // ten transfers later it is still remembered
    for (int i = 0; i < 3; ++i) {
        REQUIRE(d.cli({"submit", "sleep_ms", "--on", "chip0", "--scalar", "int64:0", "--wait"}).rc == 0);
    }
    const Output gone = d.cli({"wait", first.at("id").dump(), "--json"});
    CHECK(gone.rc == 1);
    CHECK_THAT(error_message_of(gone.json()), Catch::Contains("control.task_history"));
    CHECK(d.cli_json({"tasks"}).at("tasks").size() == 3);
}
