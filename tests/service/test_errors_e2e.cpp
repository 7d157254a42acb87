// Every error code the CLI can reach, with its exit code, its --json error and its stderr line.
//
// Not reachable from the CLI with sim chips, so not in the table:
// - INVALID_DESCRIPTOR: the CLI names buffers by ID and the daemon builds every descriptor itself from its
//   registry, so a client can never hand it a descriptor that disagrees with the registered one.
// - KERNEL_FAILED: the built-in kernels' checks all run at submit; the remaining run-time failures (a
//   tensor without a mapping, a CUDA launch error, illegal_address) need a broken worker or a cuda chip.

#include "fixture.h"
#include "helpers.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <thread>

using namespace canopy::e2e;
using nlohmann::json;

namespace {

constexpr uid_t NOBODY = 65534;

json config_with_task_timeout(int chips, int subs, int timeout_ms) {
    json config = e2e_config(chips, subs);
    config["supervision"]["task_timeout_ms"] = timeout_ms;
    return config;
}

std::string release(const Daemon& d, const std::string& id) {
    REQUIRE(d.cli({"buffer", "release", id}).rc == 0);
    return id;
}

// The view that must be refused by name: shapes=(2147483649,), strides=(2147483648,), float32 (docs/protocol.md).
json overflow_view(const std::string& buffer) {
    return tensor_arg(buffer, "output", {2147483649ULL}, {2147483648ULL});
}

enum class Via { DAEMON, AS_NOBODY, NO_SOCKET };

struct Row {
    Row(std::string code_, std::vector<std::string> args_, int exit_, std::string message_, std::string task_ = "",
        Via via_ = Via::DAEMON)
        : code(std::move(code_)), args(std::move(args_)), exit(exit_), message(std::move(message_)),
          task(std::move(task_)), via(via_) {}

    std::string code;              // the error code in the --json output (or the CLI's own code)
    std::vector<std::string> args; // canopy ARGS; --json is added
    int exit;
    std::string message; // a distinctive part of the error message
    std::string task;    // for `run`: the task whose error is checked
    Via via;
};

Output run_row(const Daemon& d, const Row& row) {
    std::vector<std::string> args = row.args;
    args.push_back("--json");
    switch (row.via) {
    case Via::DAEMON:
        return d.cli(args);
    case Via::AS_NOBODY:
        return d.cli(args, NOBODY);
    case Via::NO_SOCKET:
        args.push_back("--socket");
        args.push_back((d.dir() / "no-such.sock").string());
        return run_program(CANOPY_PATH, args);
    }
    return {};
}

} // namespace

TEST_CASE("every error code reachable from the CLI comes with its exit code, JSON error and stderr line", "[service]") {
    Daemon d(config_with_task_timeout(2, 2, 300));
    TempDir files;
    const std::string buf = d.create_buffer(4096);
    const std::string tiny = d.create_buffer(4);
    const std::string read_only = d.create_buffer(4096, "r");
    const std::string stale = release(d, d.create_buffer(4096));
    const std::string unknown = buf.substr(0, buf.find('.')) + ".999.1";
    const std::string vmm =
        d.cli_json({"buffer", "create", "--bytes", "4096", "--backend", "vmm", "--on", "chip0"}).at("id");
    const std::string sym =
        d.cli_json({"buffer", "create", "--bytes", "4096", "--backend", "symmetric", "--world", "chip0,chip1"})
            .at("id");
    const auto overflow_graph =
        write_file(files.path, "overflow.json",
                   json{{"tasks", {task("bad", "fill", "chip0", {overflow_view(tiny), float32_arg(1)})}}}.dump());
    // A holds an inout view past the 300 ms task timeout; B reads that view, so it depends on A.
    const auto dependency_graph = write_file(
        files.path, "dependency.json",
        json{
            {"tasks",
             {sleep_task("A", "chip0", 5000, {tensor_arg(buf, "inout", {16})}),
              task("B", "copy", "chip1", {tensor_arg(buf, "input", {16}), tensor_arg(buf, "output", {16}, {}, 2048)})}}}
            .dump());
    const auto ptx = write_file(files.path, "dummy.ptx", ".version 7.0\n.target sm_80\n");
    const auto small = write_file(files.path, "small.bin", std::string(100, 'x'));
    const auto out = (files.path / "out.bin").string();

    const std::vector<Row> rows = {
        {"INVALID_TENSOR", {"run", overflow_graph}, 1, "view extent overflows 64 bits", "bad"},
        {"UNKNOWN_BUFFER",
         {"submit", "fill", "--on", "chip0", "--out", unknown + ":float32:4", "--scalar", "float32:1"},
         1,
         "no buffer " + unknown},
        {"STALE_BUFFER",
         {"submit", "fill", "--on", "chip0", "--out", stale + ":float32:4", "--scalar", "float32:1"},
         1,
         stale + " was released"},
        {"STALE_BUFFER", {"buffer", "read", stale, "--to", out}, 1, "was released"},
        {"ACCESS_DENIED",
         {"submit", "fill", "--on", "chip0", "--out", read_only + ":float32:4", "--scalar", "float32:1"},
         1,
         "needs write access"},
        {"OVERLAPPING_WRITES",
         {"submit", "copy", "--on", "chip0", "--in", buf + ":float32:64", "--out", buf + ":float32:64"},
         1,
         "overlaps"},
        {"UNREACHABLE_BUFFER",
         {"submit", "fill", "--on", "sub0", "--out", vmm + ":float32:4", "--scalar", "float32:1"},
         1,
         "/sub0"},
        {"PE_OUT_OF_RANGE",
         {"submit", "peer_read", "--on", "chip0", "--in", sym + ":float32:4", "--out", buf + ":float32:4", "--scalar",
          "int64:5"},
         1,
         "pe 5"},
        {"UNKNOWN_KERNEL", {"submit", "no_such_kernel", "--on", "chip0"}, 1, "no_such_kernel"},
        {"UNKNOWN_WORKER", {"submit", "sleep_ms", "--on", "chip7", "--scalar", "int64:0"}, 1, "chip7"},
        {"NO_CONSUMER",
         {"buffer", "create", "--bytes", "4096", "--backend", "symmetric", "--world", "chip0,sub0"},
         1,
         "/sub0"},
        {"NO_CONSUMER", {"module", "load", "dummy", ptx}, 1, "cuda"},
        {"WORKER_DIED", {"submit", "abort", "--on", "chip1", "--wait"}, 1, "SIGABRT"},
        {"TIMEOUT", {"submit", "sleep_ms", "--on", "sub1", "--scalar", "int64:5000", "--wait"}, 1, "300 ms"},
        {"DEPENDENCY_FAILED", {"run", dependency_graph, "--wait"}, 1, "'A'", "B"},
        {"BAD_REQUEST",
         {"buffer", "read", buf, "--to", out, "--offset", "4000", "--bytes", "200"},
         1,
         "runs past the end"},
        {"BAD_REQUEST", {"buffer", "write", buf, "--from", small, "--offset", "4000"}, 1, "runs past the end"},
        {"BAD_REQUEST", {"submit", "sleep_ms", "--on", "sub0", "--scalar", "int64:99999999"}, 1, "99999999"},
        {"UNAUTHORIZED", {"status"}, 1, "uid 65534", "", Via::AS_NOBODY},
        {"UNREACHABLE", {"status"}, 3, "no-such.sock", "", Via::NO_SOCKET},
        {"USAGE",
         {"submit", "fill", "--on", "chip0", "--out", buf + ":float32:4x0", "--scalar", "float32:1"},
         2,
         "SHAPE \"4x0\""},
    };

    for (const Row& row : rows) {
        INFO("canopy " << Catch::Detail::stringify(row.args) << " (" << row.code << ")");
        const Output o = run_row(d, row);
        INFO("stdout: " << o.out << "\nstderr: " << o.err);
        CHECK(o.rc == row.exit);
        // `run` names on stderr the first task that failed on its own: A's TIMEOUT, not B's DEPENDENCY_FAILED.
        const std::string named = row.code == "DEPENDENCY_FAILED" ? "TIMEOUT" : row.code;
        CHECK_THAT(o.err, Catch::StartsWith("canopy: " + named + ": "));
        json parsed;
        REQUIRE_NOTHROW(parsed = o.json());
        CHECK(error_code_of(parsed, row.task) == row.code);
        CHECK_THAT(error_message_of(parsed, row.task), Catch::Contains(row.message));
    }

    // The refused peer is in the log, with its uid.
    CHECK(d.log().find("control: refused pid") != std::string::npos);
    CHECK(d.log().find("uid 65534 gid") != std::string::npos);

    // A read that fails leaves a file that was there as it was, and no partial copy beside it.
    const auto kept = write_file(files.path, "kept.bin", "old contents");
    CHECK(d.cli({"buffer", "read", buf, "--to", kept, "--offset", "4000", "--bytes", "200"}).rc == 1);
    CHECK(read_file(kept) == "old contents");
    const auto fresh = (files.path / "fresh.bin").string();
    CHECK(d.cli({"buffer", "read", buf, "--to", fresh, "--offset", "4000", "--bytes", "200"}).rc == 1);
    CHECK_FALSE(std::filesystem::exists(fresh));
    for (const auto& entry : std::filesystem::directory_iterator(files.path)) {
        CHECK(entry.path().string().find(".canopy-partial-") == std::string::npos);
    }
    // A read that succeeds replaces the file.
    CHECK(d.cli({"buffer", "read", buf, "--to", kept, "--bytes", "4"}).rc == 0);
    CHECK(read_file(kept).size() == 4);

    // DEPENDENCY_FAILED names the task that failed first; A itself failed on its own with TIMEOUT.
    const json dependency = d.cli_json({"run", dependency_graph, "--wait"});
    CHECK(error_code_of(dependency, "A") == "TIMEOUT");
    CHECK(task_named(dependency, "B").at("start_ns") == 0);

    // A usage error never touches the socket; CLI11's own parse errors print no JSON.
    const auto unknown_option = d.cli({"status", "--no-such-option", "--json"});
    CHECK(unknown_option.rc == 2);
    CHECK_THAT(unknown_option.err, Catch::StartsWith("canopy: USAGE: "));
    // The daemon serves on, its tree whole again once the worker the timeout killed is back.
    const auto whole_by = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (d.cli({"status"}).rc != 0 && std::chrono::steady_clock::now() < whole_by) {
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    CHECK(d.cli({"status"}).rc == 0);
}

TEST_CASE("a graph holding the overflowing tensor is rejected whole and none of its tasks runs", "[service]") {
    Daemon d(e2e_config(2, 2));
    TempDir files;
    const std::string tiny = d.create_buffer(4);
    const std::string other = d.create_buffer(4096);
    const json graph = {
        {"tasks",
         {sleep_task("first", "sub0", 0),
          task("mark", "fill", "chip1", {tensor_arg(other, "output", {16}), float32_arg(7)}),
          task("bad", "fill", "chip0", {overflow_view(tiny), float32_arg(1)}), sleep_task("last", "sub1", 0)}}};
    const auto path = write_file(files.path, "graph.json", graph.dump());
    const json before = d.cli_json({"status"});

    const auto run = d.cli({"run", path, "--wait", "--json"});
    CHECK(run.rc == 1);
    CHECK(error_code_of(run.json(), "bad") == "INVALID_TENSOR");
    CHECK_THAT(error_message_of(run.json(), "bad"), Catch::Contains("view extent overflows 64 bits"));

    const json listing = d.cli_json({"tasks"});
    REQUIRE(listing.at("tasks").size() == 4);
    for (const auto& t : listing.at("tasks")) {
        INFO(t.dump());
        CHECK(t.at("state") == "rejected");
        CHECK(t.at("start_ns") == 0);
        if (t.at("name") == "bad") {
            CHECK(t.at("error").at("code") == "INVALID_TENSOR");
        } else {
            CHECK(t.at("error").at("code") == "BAD_REQUEST");
            CHECK_THAT(t.at("error").at("message").get<std::string>(), Catch::Contains("not run"));
        }
    }

    // A task of the graph dispatched by mistake would run on its worker before a task submitted now (one queue
    // per worker, run in order): once one such task has finished on every worker, each counts exactly it.
    for (const auto& w : before.at("workers")) {
        REQUIRE(d.cli({"submit", "sleep_ms", "--on", w.at("path").get<std::string>(), "--scalar", "int64:0", "--wait"})
                    .rc == 0);
    }
    const json after = d.cli_json({"status"});
    for (const auto& w : before.at("workers")) {
        const json& now = worker_at(after, w.at("path"));
        CHECK(now.at("tasks_done") == w.at("tasks_done").get<std::uint64_t>() + 1);
        CHECK(now.at("tasks_failed") == w.at("tasks_failed"));
        CHECK(now.at("restarts") == 0);
    }
    const auto bytes = (files.path / "other.bin").string();
    REQUIRE(d.cli({"buffer", "read", other, "--to", bytes, "--bytes", "64"}).rc == 0);
    CHECK(read_file(bytes) == std::string(64, '\0')); // "mark" never wrote

    // Still serving: a good task runs.
    CHECK(d.cli({"submit", "fill", "--on", "chip0", "--out", tiny + ":float32:1", "--scalar", "float32:2", "--wait"})
              .rc == 0);
}

TEST_CASE("run --json of a rejected graph lists every task with its state", "[service]") {
    Daemon d(e2e_config(2, 2));
    TempDir files;
    const std::string tiny = d.create_buffer(4);
    const json graph = {
        {"tasks",
         {sleep_task("first", "sub0", 0), task("bad", "fill", "chip0", {overflow_view(tiny), float32_arg(1)})}}};
    const auto path = write_file(files.path, "graph.json", graph.dump());
    const auto run = d.cli({"run", path, "--json"});
    CHECK(run.rc == 1);
    const json out = run.json();
    CHECK(out.contains("tasks"));
    if (out.contains("tasks")) {
        CHECK(task_named(out, "first").at("state") == "rejected");
        CHECK(task_named(out, "bad").at("state") == "rejected");
        CHECK(task_named(out, "bad").at("error").at("code") == "INVALID_TENSOR");
    }
    const auto human = d.cli({"run", path});
    CHECK_THAT(human.err, Catch::Contains("canopy: INVALID_TENSOR: task bad (id "));
    const json listing = d.cli_json({"tasks"});
    const json& listed = task_named(listing, "bad");
    CHECK(listed.at("kernel") == "fill");
    CHECK(listed.at("on") == "chip0");
}

TEST_CASE("wait for a task id that was never issued fails with BAD_REQUEST and the daemon keeps serving", "[service]") {
    Daemon d(e2e_config(1, 1));
    const auto out = d.cli({"wait", "999999", "--json"});
    CHECK(out.rc == 1);
    CHECK_THAT(out.out, Catch::Contains("BAD_REQUEST"));
    CHECK(d.cli({"status"}).rc == 0);
}

TEST_CASE("run of a graph without tasks fails with BAD_REQUEST and the daemon keeps serving", "[service]") {
    Daemon d(e2e_config(1, 1));
    TempDir files;
    const auto path = write_file(files.path, "empty.json", R"({"tasks": []})");
    const auto out = d.cli({"run", path, "--json"});
    CHECK(out.rc == 1);
    CHECK_THAT(out.out, Catch::Contains("BAD_REQUEST"));
    CHECK(d.cli({"status"}).rc == 0);
}

// CANOPY_CHECK_THREADS=4 spreads the checks of a graph of 600 tasks over four threads (chunks of 150) on any
// machine: the rejections land in three different chunks, and each is reported at its own position. With
// checker threads the good graph's first tasks are dispatched while the rest are still being queued.
TEST_CASE("a large graph checked on several threads is rejected whole with each bad task named, then runs whole",
          "[service]") {
    Daemon d(e2e_config(2, 2), {{"CANOPY_CHECK_THREADS", "4"}});
    TempDir files;
    constexpr std::size_t COUNT = 600;
    const std::string v = d.create_buffer(COUNT * 4);
    const std::string tiny = d.create_buffer(4);
    const std::vector<std::string> workers = {"chip0", "sub0", "chip1", "sub1"};
    const auto good = [&](std::size_t i) {
        return task("t" + std::to_string(i), "fill", workers[i % workers.size()],
                    {tensor_arg(v, "output", {1}, {}, 4 * i), float32_arg(static_cast<double>(i))});
    };
    json tasks = json::array();
    for (std::size_t i = 0; i < COUNT; ++i) {
        tasks.push_back(good(i));
    }
    json bad = tasks;
    bad[200]["name"] = "t100";
    bad[450] = task("t450", "fill", "chip0", {overflow_view(tiny), float32_arg(1)});
    bad[520]["on"] = "chip9";
    const auto bad_path = write_file(files.path, "bad.json", json{{"tasks", bad}}.dump());
    const auto run = d.cli({"run", bad_path, "--wait", "--json"});
    CHECK(run.rc == 1);
    const json out = run.json();
    REQUIRE(out.at("tasks").size() == COUNT);
    for (std::size_t i = 0; i < COUNT; ++i) {
        const json& t = out.at("tasks")[i];
        INFO(i << ": " << t.dump());
        REQUIRE(t.at("state") == "rejected");
        const std::string message = t.at("error").at("message");
        if (i == 200) {
            CHECK(t.at("error").at("code") == "BAD_REQUEST");
            CHECK(message == "tasks[200]: task name 't100' is used twice in the graph");
        } else if (i == 450) {
            CHECK(t.at("error").at("code") == "INVALID_TENSOR");
            CHECK_THAT(message, Catch::StartsWith("tasks[450]") && Catch::Contains("view extent overflows 64 bits"));
        } else if (i == 520) {
            CHECK(t.at("error").at("code") == "UNKNOWN_WORKER");
            CHECK_THAT(message, Catch::StartsWith("tasks[520]") && Catch::Contains("chip9"));
        } else {
            CHECK(t.at("error").at("code") == "BAD_REQUEST");
            CHECK(message == "not run: task 't100' of this graph was rejected");
        }
    }
    const auto bytes = (files.path / "v.bin").string();
    REQUIRE(d.cli({"buffer", "read", v, "--to", bytes}).rc == 0);
    CHECK(read_file(bytes) == std::string(COUNT * 4, '\0'));

    const auto good_path = write_file(files.path, "good.json", json{{"tasks", tasks}}.dump());
    const auto done = d.cli({"run", good_path, "--wait", "--json"});
    INFO(done.err);
    REQUIRE(done.rc == 0);
    const json finished = done.json();
    for (const auto& t : finished.at("tasks")) {
        REQUIRE(t.at("state") == "completed");
    }
    REQUIRE(d.cli({"buffer", "read", v, "--to", bytes}).rc == 0);
    const std::string values = read_file(bytes);
    REQUIRE(values.size() == COUNT * 4);
    for (std::size_t i = 0; i < COUNT; ++i) {
        float f = -1;
        std::memcpy(&f, values.data() + 4 * i, 4);
        INFO(i);
        REQUIRE(f == static_cast<float>(i));
    }
}
