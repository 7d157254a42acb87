// Dependency inference seen from outside: sleep_ms tasks hold views without touching them, and the
// workers' start_ns/end_ns (CLOCK_MONOTONIC, one clock for every process of the host) show which tasks
// waited for which. No assertion depends on wall-clock totals.

#include "fixture.h"
#include "helpers.h"

#include <catch2/catch.hpp>
#include <cstring>

using namespace canopy::e2e;
using nlohmann::json;

namespace {

constexpr std::int64_t HOLD_MS = 300;

// A 4x16 float32 matrix, row-major: column block `j` is 4x4 at byte offset 16*j.
constexpr std::uint64_t ROWS = 4;
constexpr std::uint64_t COLS = 16;
constexpr std::uint64_t MATRIX_BYTES = ROWS * COLS * 4;

json column_block(const std::string& buffer, const std::string& tag, std::uint64_t j) {
    return tensor_arg(buffer, tag, {ROWS, 4}, {COLS, 1}, 16 * j);
}

json whole_rows(const std::string& buffer, const std::string& tag, std::uint64_t rows) {
    return tensor_arg(buffer, tag, {rows, COLS});
}

// Runs the graph with `run --wait --json`; every task must complete.
json run_waited(const Daemon& d, const json& tasks) {
    REQUIRE(tasks.is_array());
    TempDir files;
    const auto path = write_file(files.path, "graph.json", json{{"tasks", tasks}}.dump());
    const Output o = d.cli({"run", path, "--wait", "--json"});
    INFO(o.out << o.err);
    REQUIRE(o.rc == 0);
    const json out = o.json();
    for (const auto& t : out.at("tasks")) {
        REQUIRE(t.at("state") == "completed");
        REQUIRE(t.at("start_ns").get<std::uint64_t>() > 0);
        REQUIRE(t.at("end_ns").get<std::uint64_t>() >= t.at("start_ns").get<std::uint64_t>());
    }
    return out;
}

std::uint64_t ns(const json& t, const char* key) {
    return t.at(key).get<std::uint64_t>();
}

// `second` began only after `first` ended.
void check_ordered(const json& out, const std::string& first, const std::string& second) {
    const json& a = task_named(out, first);
    const json& b = task_named(out, second);
    INFO(a.dump() << "\n" << b.dump());
    CHECK(ns(b, "start_ns") >= ns(a, "end_ns"));
}

} // namespace

TEST_CASE("tasks writing disjoint column blocks of one matrix on four workers run concurrently", "[service]") {
    Daemon d(e2e_config(2, 2));
    const std::string m = d.create_buffer(MATRIX_BYTES);
    const std::vector<std::string> workers = {"chip0", "chip1", "sub0", "sub1"};
    json tasks = json::array();
    for (std::size_t j = 0; j < workers.size(); ++j) {
        tasks.push_back(sleep_task("block" + std::to_string(j), workers[j], HOLD_MS, {column_block(m, "output", j)}));
    }
    const json out = run_waited(d, tasks);
    for (std::size_t i = 0; i < workers.size(); ++i) {
        for (std::size_t j = i + 1; j < workers.size(); ++j) {
            const json& a = task_named(out, "block" + std::to_string(i));
            const json& b = task_named(out, "block" + std::to_string(j));
            INFO(a.dump() << "\n" << b.dump());
            CHECK(ran_concurrently(a, b));
        }
    }
}

TEST_CASE("a write to a view another task reads waits until the read has finished", "[service]") {
    Daemon d(e2e_config(2, 2));
    const std::string m = d.create_buffer(MATRIX_BYTES);
    const json out = run_waited(d, {sleep_task("reader", "chip0", HOLD_MS, {whole_rows(m, "input", 2)}),
                                    sleep_task("writer", "chip1", 10, {column_block(m, "output", 1)})});
    check_ordered(out, "reader", "writer");
}

TEST_CASE("a read of a view another task writes waits until the write has finished", "[service]") {
    Daemon d(e2e_config(2, 2));
    const std::string m = d.create_buffer(MATRIX_BYTES);
    const json out = run_waited(d, {sleep_task("writer", "chip0", HOLD_MS, {column_block(m, "output", 2)}),
                                    sleep_task("reader", "sub0", 10, {whole_rows(m, "input", 1)})});
    check_ordered(out, "writer", "reader");
}

TEST_CASE("two writes to overlapping views run one after the other", "[service]") {
    Daemon d(e2e_config(2, 2));
    const std::string m = d.create_buffer(MATRIX_BYTES);
    const json out = run_waited(d, {sleep_task("first", "sub0", HOLD_MS, {column_block(m, "inout", 3)}),
                                    sleep_task("second", "sub1", 10, {whole_rows(m, "output", ROWS)})});
    check_ordered(out, "first", "second");
}

TEST_CASE("two reads of one view run concurrently", "[service]") {
    Daemon d(e2e_config(2, 2));
    const std::string m = d.create_buffer(MATRIX_BYTES);
    const json out = run_waited(d, {sleep_task("a", "chip0", HOLD_MS, {whole_rows(m, "input", ROWS)}),
                                    sleep_task("b", "chip1", HOLD_MS, {whole_rows(m, "input", ROWS)})});
    CHECK(ran_concurrently(task_named(out, "a"), task_named(out, "b")));
}

TEST_CASE("writes to views of different buffers run concurrently", "[service]") {
    Daemon d(e2e_config(2, 2));
    const std::string m = d.create_buffer(MATRIX_BYTES);
    const std::string n = d.create_buffer(MATRIX_BYTES);
    const json out = run_waited(d, {sleep_task("m", "chip0", HOLD_MS, {whole_rows(m, "output", ROWS)}),
                                    sleep_task("n", "sub1", HOLD_MS, {whole_rows(n, "output", ROWS)})});
    CHECK(ran_concurrently(task_named(out, "m"), task_named(out, "n")));
}

TEST_CASE("a dependency on a task of an earlier submission is honoured", "[service]") {
    Daemon d(e2e_config(2, 2));
    const std::string m = d.create_buffer(MATRIX_BYTES);
    const json writer =
        d.cli_json({"submit", "sleep_ms", "--on", "chip0", "--out", m + ":float32:" + std::to_string(ROWS * COLS),
                    "--scalar", "int64:" + std::to_string(HOLD_MS)});
    const json out = run_waited(d, json::array({sleep_task("reader", "chip1", 10, {column_block(m, "input", 0)})}));
    const json done = d.cli_json({"wait", std::to_string(writer.at("id").get<std::uint64_t>())});
    REQUIRE(done.at("state") == "completed");
    CHECK(ns(task_named(out, "reader"), "start_ns") >= ns(done, "end_ns"));
}

// A chain of 62 tasks over one value whose steps hop between chips and subs: every edge crosses or stays on a
// lane (a chip's stream order, or the supervisor's completion). Scaling and adding one do not commute, so the
// final value says the steps ran in graph order, as the start and end times say for each edge. Two checker
// threads turn on early dispatch on any machine: the first steps reach their workers every 16 tasks queued.
TEST_CASE("a long chain that hops between workers runs every edge in order", "[service]") {
    Daemon d(e2e_config(2, 2), {{"CANOPY_CHECK_THREADS", "2"}});
    constexpr int STEPS = 60;
    const std::string v = d.create_buffer(4);
    const std::string one = d.create_buffer(4);
    const std::vector<std::string> workers = {"chip0", "sub0", "chip1", "sub1", "chip0", "chip0", "sub1"};
    json tasks = json::array();
    tasks.push_back(task("ones", "fill", "sub0", {tensor_arg(one, "output", {1}), float32_arg(1.0)}));
    tasks.push_back(task("start", "fill", "chip1", {tensor_arg(v, "output", {1}), float32_arg(1.0)}));
    for (int i = 0; i < STEPS; ++i) {
        const std::string& on = workers[static_cast<std::size_t>(i) % workers.size()];
        if (i % 3 == 2) {
            tasks.push_back(task("s" + std::to_string(i), "axpy", on,
                                 {tensor_arg(one, "input", {1}), tensor_arg(v, "inout", {1}), float32_arg(1.0)}));
        } else {
            tasks.push_back(
                task("s" + std::to_string(i), "scale", on, {tensor_arg(v, "inout", {1}), float32_arg(1.5)}));
        }
    }
    const json out = run_waited(d, tasks);
    check_ordered(out, "start", "s0");
    for (int i = 1; i < STEPS; ++i) {
        check_ordered(out, "s" + std::to_string(i - 1), "s" + std::to_string(i));
    }
    TempDir files;
    const auto path = (files.path / "v.bin").string();
    REQUIRE(d.cli({"buffer", "read", v, "--to", path}).rc == 0);
    const std::string bytes = read_file(path);
    REQUIRE(bytes.size() == 4);
    float got = 0;
    std::memcpy(&got, bytes.data(), 4);
    // Each step rounds once in float32, as the kernels compute in the dtype; the order of the steps decides the
    // value far beyond that rounding.
    float reference = 1.0F;
    for (int i = 0; i < STEPS; ++i) {
        reference = i % 3 == 2 ? reference + 1.0F : reference * 1.5F;
    }
    CHECK(got == reference);
}

TEST_CASE("a buffer's release waits for the tasks queued over it, which complete, and refuses new uses at once",
          "[service]") {
    Daemon d(e2e_config(1, 1));
    for (const std::string worker : {"chip0", "sub0"}) {
        INFO("worker " << worker);
        const std::string buffer = d.create_buffer(4096);
        RawClient c(d.socket());
        // "hold" keeps the buffer for a while; "fill", which writes it, is queued behind it.
        const json graph = {
            {"tasks",
             {sleep_task("hold-" + worker, worker, 1500, {tensor_arg(buffer, "input", {1024})}),
              task("fill-" + worker, "fill", worker, {tensor_arg(buffer, "output", {1024}), float32_arg(2.5)})}}};
        const json run = c.request({{"op", "run"}, {"graph", graph}});
        REQUIRE(run.at("ok") == true);
        const json fill_id = task_named(run, "fill-" + worker).at("id");

        RawClient releaser(d.socket());
        releaser.send_frame(json{{"op", "buffer.release"}, {"buffer", buffer}}.dump());
        // Set-up: the release has begun once the buffer is refused to a new use.
        const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
        json show;
        do {
            show = c.request({{"op", "buffer.show"}, {"buffer", buffer}});
        } while (show.at("ok") == true && std::chrono::steady_clock::now() < deadline);
        const std::uint64_t refused_ns = monotonic_now_ns();
        REQUIRE(error_code_of(show) == "STALE_BUFFER");
        CHECK_THAT(error_message_of(show), Catch::Contains(buffer + " was released"));

        // Every new use is refused while the queued tasks still run.
        const json submit = c.request(
            {{"op", "submit"},
             {"task", task("late-" + worker, "fill", worker, {tensor_arg(buffer, "output", {1024}), float32_arg(1)})}});
        CHECK(error_code_of(submit) == "STALE_BUFFER");
        CHECK_THAT(error_message_of(submit), Catch::Contains(buffer + " was released"));
        const json read = c.request({{"op", "buffer.read"}, {"buffer", buffer}, {"bytes", 16}});
        CHECK(error_code_of(read) == "STALE_BUFFER");
        const json write = c.request({{"op", "buffer.write"}, {"buffer", buffer}, {"data", "AAAA"}});
        CHECK(error_code_of(write) == "STALE_BUFFER");
        const json fd = c.request({{"op", "buffer.fd"}, {"buffer", buffer}});
        CHECK(error_code_of(fd) == "STALE_BUFFER");
        const json again = c.request({{"op", "buffer.release"}, {"buffer", buffer}});
        CHECK(error_code_of(again) == "STALE_BUFFER");
        const json list = c.request({{"op", "buffer.list"}});
        for (const auto& b : list.at("buffers")) {
            CHECK(b.at("id") != buffer);
        }

        // The release answers once the queued fill has run, and the fill completed.
        const auto released = releaser.read_reply(std::chrono::seconds(30));
        const std::uint64_t released_ns = monotonic_now_ns();
        REQUIRE(released.has_value());
        CHECK(released->at("ok") == true);
        const json waited = c.request({{"op", "wait"}, {"task_id", fill_id}});
        const json& fill = waited.at("task");
        INFO(fill.dump());
        CHECK(fill.at("state") == "completed");
        // The fill started after the release had begun, and the release answered after it ended.
        CHECK(ns(fill, "start_ns") > refused_ns);
        CHECK(ns(fill, "end_ns") <= released_ns);
        CHECK(error_code_of(c.request({{"op", "buffer.show"}, {"buffer", buffer}})) == "STALE_BUFFER");
    }
    CHECK(tasks_done_sum(d.cli_json({"status"})) >= 4);
}

TEST_CASE("a client's write, read and release behind a failed task still run, in order", "[service]") {
    Daemon d(e2e_config(0, 1));
    const std::string buffer = d.create_buffer(4096);
    const json head = tensor_arg(buffer, "inout", {64}, {}, 0, "uint8");
    RawClient c(d.socket());
    const json tasks = json::array({sleep_task("hold", "sub0", 1500, {head}), sleep_task("doomed", "sub0", 0, {head})});
    const json run = c.request({{"op", "run"}, {"graph", {{"tasks", tasks}}}});
    REQUIRE(run.at("ok") == true);
    const json doomed = task_named(run, "doomed").at("id");
    // Behind "doomed": a write, a read of what it writes, and the buffer's release, each on a connection of its own.
    RawClient writer(d.socket());
    writer.send_frame(json{{"op", "buffer.write"}, {"buffer", buffer}, {"data", "eHh4eHh4eHh4eHh4eHh4eA=="}}.dump());
    RawClient reader(d.socket());
    reader.send_frame(json{{"op", "buffer.read"}, {"buffer", buffer}, {"bytes", 16}}.dump());
    RawClient releaser(d.socket());
    releaser.send_frame(json{{"op", "buffer.release"}, {"buffer", buffer}}.dump());
    // Set-up: all three are in once the release has begun (the buffer is refused to a new use).
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (c.request({{"op", "buffer.show"}, {"buffer", buffer}}).at("ok") == true &&
           std::chrono::steady_clock::now() < deadline) {
    }
    // Cancelling "doomed" fails it; the steps behind it run once "hold" has finished, and are not failed with it.
    const json cancel = c.request({{"op", "cancel"}, {"task_ids", json::array({doomed})}});
    REQUIRE(cancel.at("ok") == true);
    CHECK(cancel.at("tasks").at(0).at("cancel") == "cancelled");
    const auto written = writer.read_reply(std::chrono::seconds(30));
    REQUIRE(written.has_value());
    CHECK(*written == json{{"ok", true}, {"written", 16}});
    const auto read = reader.read_reply(std::chrono::seconds(30));
    REQUIRE(read.has_value());
    CHECK(read->at("data") == "eHh4eHh4eHh4eHh4eHh4eA=="); // sixteen 'x', the write's
    const auto released = releaser.read_reply(std::chrono::seconds(30));
    REQUIRE(released.has_value());
    CHECK(released->at("ok") == true);
    const json waited =
        c.request({{"op", "wait"}, {"task_ids", json::array({task_named(run, "hold").at("id"), doomed})}});
    INFO(waited.dump());
    CHECK(waited.at("tasks").at(0).at("state") == "completed");
    CHECK(waited.at("tasks").at(1).at("error").at("code") == "CANCELLED");
    CHECK(error_code_of(c.request({{"op", "buffer.show"}, {"buffer", buffer}})) == "STALE_BUFFER");
}
