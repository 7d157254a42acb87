// Many clients at once: 32 raw connections submitting 500 sleep_ms tasks each, without waiting, and then
// waiting for every id they were given.

#include "fixture.h"
#include "helpers.h"

#include <catch2/catch.hpp>
#include <mutex>
#include <set>
#include <thread>

using namespace canopy::e2e;
using nlohmann::json;

namespace {

constexpr std::size_t CLIENTS = 32;
constexpr std::size_t TASKS_PER_CLIENT = 500;
// Submits in flight per client before it waits for them: at most CLIENTS * WINDOW tasks are outstanding at any
// time.
constexpr std::size_t WINDOW = 4;
// `wait` finds a finished task only while it is among the newest `control.task_history` finished ones
// (docs/control-protocol.md `tasks`). The daemon remembers every task of the test: with the default of 10 000, a
// client that the scheduler kept off the CPUs between a submit's reply and its `wait` while the other 31 clients
// finished 10 000 tasks would be told its task is unknown, which is the history's limit and not what this tests.
constexpr std::size_t HISTORY = CLIENTS * TASKS_PER_CLIENT;
const std::vector<std::string> WORKERS = {"chip0", "chip1", "sub0", "sub1"};

struct ClientResult {
    std::vector<std::uint64_t> ids;
    std::vector<std::string> problems;
};

json submit_request(const std::string& on, std::size_t seq) {
    return {
        {"op", "submit"},
        {"id", seq},
        {"task", {{"name", "t" + std::to_string(seq)}, {"kernel", "sleep_ms"}, {"on", on}, {"args", {int64_arg(0)}}}}};
}

// One client: windows of WINDOW submits (replies give the ids), then one `wait` per id.
void client(const std::string& socket, std::size_t index, ClientResult& result) {
    try {
        RawClient c(socket);
        std::size_t seq = 0;
        for (std::size_t done = 0; done < TASKS_PER_CLIENT; done += WINDOW) {
            const std::size_t n = std::min(WINDOW, TASKS_PER_CLIENT - done);
            for (std::size_t k = 0; k < n; ++k) {
                const std::size_t global = index * TASKS_PER_CLIENT + done + k;
                c.send_frame(submit_request(WORKERS[global % WORKERS.size()], ++seq).dump());
            }
            std::vector<std::uint64_t> window;
            for (std::size_t k = 0; k < n; ++k) {
                const auto reply = c.read_reply();
                if (!reply || reply->value("ok", false) != true) {
                    throw std::runtime_error("submit: " + (reply ? reply->dump() : std::string("no reply")));
                }
                window.push_back(reply->at("task").at("id").get<std::uint64_t>());
            }
            for (const auto id : window) {
                c.send_frame(json{{"op", "wait"}, {"id", ++seq}, {"task_id", id}}.dump());
            }
            for (const auto id : window) {
                const auto reply = c.read_reply();
                if (!reply || reply->value("ok", false) != true) {
                    throw std::runtime_error("wait " + std::to_string(id) + ": " +
                                             (reply ? reply->dump() : std::string("no reply")));
                }
                const json& t = reply->at("task");
                if (t.at("id") != id || t.at("state") != "completed") {
                    result.problems.push_back("task " + std::to_string(id) + ": " + t.dump());
                }
                result.ids.push_back(id);
            }
        }
    } catch (const std::exception& e) {
        result.problems.push_back("client " + std::to_string(index) + ": " + e.what());
    }
}

std::uint64_t completed_total(const json& metrics) {
    const std::string text = metrics.at("text").get<std::string>();
    const std::string key = "canopy_tasks_total{state=\"completed\"} ";
    const auto at = text.find(key);
    return at == std::string::npos ? 0 : std::stoull(text.substr(at + key.size()));
}

} // namespace

TEST_CASE("32 clients submitting 500 tasks each see every task complete exactly once", "[service]") {
    Daemon d(e2e_config(2, 2, {{"control", {{"task_history", HISTORY}}}}));
    RawClient observer(d.socket());
    const json status_before = observer.request({{"op", "status"}});
    const std::uint64_t metric_before = completed_total(observer.request({{"op", "metrics"}}));

    std::vector<ClientResult> results(CLIENTS);
    std::vector<std::thread> threads;
    for (std::size_t i = 0; i < CLIENTS; ++i) {
        threads.emplace_back(client, d.socket(), i, std::ref(results[i]));
    }
    for (auto& t : threads) {
        t.join();
    }

    std::set<std::uint64_t> ids;
    std::size_t returned = 0;
    for (const auto& r : results) {
        for (const auto& p : r.problems) {
            FAIL_CHECK(p);
        }
        returned += r.ids.size();
        ids.insert(r.ids.begin(), r.ids.end());
    }
    CHECK(returned == CLIENTS * TASKS_PER_CLIENT);
    CHECK(ids.size() == CLIENTS * TASKS_PER_CLIENT);

    const json status_after = observer.request({{"op", "status"}});
    CHECK(tasks_done_sum(status_after) - tasks_done_sum(status_before) == CLIENTS * TASKS_PER_CLIENT);
    for (const auto& w : status_after.at("workers")) {
        const json& before = worker_at(status_before, w.at("path"));
        INFO(w.dump());
        CHECK(w.at("tasks_done").get<std::uint64_t>() - before.at("tasks_done").get<std::uint64_t>() ==
              CLIENTS * TASKS_PER_CLIENT / WORKERS.size());
        CHECK(w.at("tasks_failed") == before.at("tasks_failed"));
        CHECK(w.at("restarts") == 0);
    }
    CHECK(completed_total(observer.request({{"op", "metrics"}})) - metric_before == CLIENTS * TASKS_PER_CLIENT);
    // The history holds every task: 16 000 of them, which a sanitizer build's JSON parser takes seconds to read.
    observer.send_frame(json{{"op", "tasks"}}.dump());
    const auto tasks = observer.read_reply(std::chrono::seconds(120));
    REQUIRE(tasks.has_value());
    CHECK(tasks->at("tasks").size() == CLIENTS * TASKS_PER_CLIENT);
    for (const auto& t : tasks->at("tasks")) {
        CHECK(t.at("state") == "completed");
    }
}

TEST_CASE("a nested node answers a quick task on one of its workers while an earlier task runs long on another",
          "[service]") {
    const json config = {{"node",
                          {{"name", "rack"},
                           {"level", 4},
                           {"subs", 1},
                           {"nodes",
                            {{{"name", "n0"},
                              {"level", 3},
                              {"chips", json::array({{{"device", 0}, {"backend", "sim"}}})},
                              {"subs", 1}}}}}},
                         {"supervision", {{"drain_timeout_ms", 1000}}}};
    Daemon d(config);
    RawClient c(d.socket());
    const json slow = c.request(
        {{"op", "submit"}, {"task", {{"kernel", "sleep_ms"}, {"on", "n0/sub0"}, {"args", {int64_arg(20000)}}}}});
    REQUIRE(slow.value("ok", false));
    // The node's mailbox hands each result back as it comes, not behind the frame before it.
    const json quick = d.cli_json({"submit", "sleep_ms", "--on", "n0/chip0", "--scalar", "int64:0", "--wait"});
    CHECK(quick.at("state") == "completed");
    std::string slow_state;
    const json listing = c.request({{"op", "tasks"}});
    INFO(slow.dump() << " " << listing.dump());
    for (const auto& t : listing.at("tasks")) {
        if (t.at("id") == slow.at("task").at("id")) {
            slow_state = t.at("state");
        }
    }
    CHECK(slow_state == "running");
}
