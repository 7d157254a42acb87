// Human and --json output of each command.

#include "cli/render.h"
#include "cli/table.h"
#include "tests/cli/fake_daemon.h"

#include <catch2/catch.hpp>

using namespace canopy::cli;
using namespace canopy::cli::testing;
using nlohmann::json;

namespace {

json worker(const std::string& path, const std::string& kind, const std::string& backend, int device, int pid,
            const std::string& state, double uptime, const std::string& last_exit = "") {
    return {{"path", path},      {"kind", kind},       {"backend", backend},    {"device", device},
            {"pid", pid},        {"state", state},     {"restarts", 0},         {"tasks_done", 12},
            {"tasks_failed", 1}, {"uptime_s", uptime}, {"last_exit", last_exit}};
}

const json STATUS = {
    {"node", {{"name", "host-a"}, {"level", 4}}},
    {"pid", 1200},
    {"uptime_s", 7512.4},
    {"workers",
     {worker("/chip0", "chip", "sim", 0, 1201, "running", 184.2), worker("/node0", "node", "", 0, 1202, "running", 12),
      worker("/node0/chip1", "chip", "cuda", 1, -1, "dead", 0, "signal SIGSEGV"),
      worker("node0/sub0", "sub", "", 0, 1204, "running", 12),
      worker("/sub1", "sub", "", 0, 1205, "restarting", 3, "exit 1")}}};

const json BUFFERS = {{{"id", "0011..ff.3.1"},
                       {"backend", "posix_shm"},
                       {"nbytes", 4194304},
                       {"access", "rw"},
                       {"device", 0},
                       {"world", json::array()},
                       {"name", ""},
                       {"creator", "/"}},
                      {{"id", "0011..ff.4.1"},
                       {"backend", "sim_vmm"},
                       {"nbytes", 512},
                       {"access", "r"},
                       {"device", 0},
                       {"world", {"chip0", "chip1"}},
                       {"name", ""},
                       {"creator", "/chip0"}}};

FakeReply sample_reply(const json& request) {
    const std::string op = request.value("op", "");
    if (op == "status") {
        return ok(STATUS);
    }
    if (op == "buffer.list") {
        return ok({{"buffers", BUFFERS}});
    }
    if (op == "buffer.create" || op == "buffer.show") {
        return ok({{"buffer", BUFFERS[0]}});
    }
    if (op == "buffer.release") {
        return ok({{"warning", "shm_unlink /canopy-x: No such file or directory"}});
    }
    if (op == "tasks") {
        return ok({{"tasks",
                    {{{"name", "init"},
                      {"id", 3},
                      {"kernel", "fill"},
                      {"on", "chip0"},
                      {"state", "completed"},
                      {"submitted_ns", 1},
                      {"start_ns", 1000},
                      {"end_ns", 3'401'000}},
                     {{"name", "boom"},
                      {"id", 4},
                      {"kernel", "segfault"},
                      {"on", "sub0"},
                      {"state", "failed"},
                      {"error", {{"code", "WORKER_DIED"}, {"message", "sub0 died: signal SIGSEGV"}}},
                      {"submitted_ns", 2},
                      {"start_ns", 0},
                      {"end_ns", 0}}}}});
    }
    if (op == "metrics") {
        return ok({{"text", "canopy_tasks_total 4"}});
    }
    return ok();
}

} // namespace

TEST_CASE("status draws the worker tree with its columns", "[cli]") {
    CHECK(render_status(STATUS) ==
          "node host-a (level 4), canopyd pid 1200, up 2h05m\n"
          "WORKER       STATE        PID  DEVICE  DONE  FAILED  RESTARTS  UPTIME  LAST EXIT\n"
          "/            running     1200  -          -       -         -   2h05m\n"
          "├─ chip0     running     1201  sim:0     12       1         0   3m04s\n"
          "├─ node0     running     1202  -         12       1         0     12s\n"
          "│  ├─ chip1  dead           -  cuda:1    12       1         0       -  signal SIGSEGV\n"
          "│  └─ sub0   running     1204  -         12       1         0     12s\n"
          "└─ sub1      restarting  1205  -         12       1         0       -  exit 1\n");
}

TEST_CASE("status leaves out LAST EXIT when every worker runs", "[cli]") {
    const json status = {{"node", {{"name", "n"}, {"level", 3}}},
                         {"pid", 9},
                         {"uptime_s", 5},
                         {"workers", {worker("/chip0", "chip", "sim", 0, 10, "running", 5)}}};
    CHECK(render_status(status) == "node n (level 3), canopyd pid 9, up 5s\n"
                                   "WORKER    STATE    PID  DEVICE  DONE  FAILED  RESTARTS  UPTIME\n"
                                   "/         running    9  -          -       -         -      5s\n"
                                   "└─ chip0  running   10  sim:0     12       1         0      5s\n");
}

TEST_CASE("status renders missing and mistyped fields as dashes", "[cli]") {
    const json status = {{"workers", {json{{"path", 5}}, json("junk"), json{{"path", "/x"}, {"pid", "p"}}}}};
    const std::string text = render_status(status);
    CHECK(text.find("node -, canopyd pid -") == 0);
    CHECK(text.find("└─ x") != std::string::npos);
    CHECK(render_status(json::array()) == "-\n");
}

TEST_CASE("status --json prints the daemon's payload and exits 1 while a worker is not running", "[cli]") {
    FakeDaemon daemon(sample_reply);
    const CliRun r = run({"status", "--json"}, daemon.socket_path());
    CHECK(r.rc == 1);
    CHECK(json::parse(r.out) == STATUS);
    const CliRun human = run({"status"}, daemon.socket_path());
    CHECK(human.rc == 1);
    CHECK(human.out == render_status(STATUS));
}

TEST_CASE("status exits 0 when every worker runs", "[cli]") {
    json all_up = STATUS;
    for (auto& w : all_up["workers"]) {
        w["state"] = "running";
    }
    FakeDaemon daemon([&](const json&) { return ok(all_up); });
    CHECK(run({"status"}, daemon.socket_path()).rc == 0);
    CHECK(run({"status", "--json"}, daemon.socket_path()).rc == 0);
}

TEST_CASE("buffer list draws a table with human and exact sizes", "[cli]") {
    FakeDaemon daemon(sample_reply);
    const CliRun r = run({"buffer", "list"}, daemon.socket_path());
    REQUIRE(r.rc == 0);
    CHECK(r.out == "ID            BACKEND                BYTES  ACCESS  WHERE\n"
                   "0011..ff.3.1  posix_shm  4.0 MiB (4194304)  rw      /\n"
                   "0011..ff.4.1  sim_vmm          512 B (512)  r       chip0,chip1\n");
}

TEST_CASE("buffer list shows NAME when a buffer has one", "[cli]") {
    json buffers = BUFFERS;
    buffers[1]["name"] = "weights";
    const std::string text = render_buffer_list(buffers);
    CHECK(text.find("ID            NAME     BACKEND") == 0);
    CHECK(text.find("0011..ff.4.1  weights  sim_vmm") != std::string::npos);
}

TEST_CASE("buffer list --json prints the buffers object", "[cli]") {
    FakeDaemon daemon(sample_reply);
    const CliRun r = run({"buffer", "list", "--json"}, daemon.socket_path());
    REQUIRE(r.rc == 0);
    CHECK(json::parse(r.out) == json{{"buffers", BUFFERS}});
}

TEST_CASE("buffer create and show --json print the buffer object itself", "[cli]") {
    FakeDaemon daemon(sample_reply);
    for (std::vector<std::string> args : {std::vector<std::string>{"buffer", "create", "--bytes", "4M", "--json"},
                                          std::vector<std::string>{"buffer", "show", "x", "--json"}}) {
        const CliRun r = run(args, daemon.socket_path());
        REQUIRE(r.rc == 0);
        const json out = json::parse(r.out);
        CHECK(out == BUFFERS[0]);
        CHECK(out.contains("id"));
        CHECK(out.contains("backend"));
        CHECK(out.contains("nbytes"));
        CHECK(out.contains("access"));
    }
}

TEST_CASE("buffer create prints the new buffer's fields", "[cli]") {
    FakeDaemon daemon(sample_reply);
    const CliRun r = run({"buffer", "create", "--bytes", "4M"}, daemon.socket_path());
    REQUIRE(r.rc == 0);
    CHECK(r.out == "id       0011..ff.3.1\n"
                   "backend  posix_shm\n"
                   "bytes    4.0 MiB (4194304)\n"
                   "access   rw\n"
                   "device   0\n"
                   "creator  /\n");
}

TEST_CASE("buffer release reports the daemon's warning on stderr and still succeeds", "[cli]") {
    FakeDaemon daemon(sample_reply);
    const CliRun r = run({"buffer", "release", "B"}, daemon.socket_path());
    CHECK(r.rc == 0);
    CHECK(r.out == "released B\n");
    CHECK(r.err == "canopy: warning: shm_unlink /canopy-x: No such file or directory\n");
}

TEST_CASE("tasks draws a table with times and errors", "[cli]") {
    FakeDaemon daemon(sample_reply);
    const CliRun r = run({"tasks"}, daemon.socket_path());
    REQUIRE(r.rc == 0);
    CHECK(r.out == "ID  NAME  KERNEL    ON     STATE       TIME  ERROR\n"
                   " 3  init  fill      chip0  completed  3.4ms\n"
                   " 4  boom  segfault  sub0   failed         -  WORKER_DIED: sub0 died: signal SIGSEGV\n");
    const CliRun j = run({"tasks", "--json"}, daemon.socket_path());
    CHECK(json::parse(j.out)["tasks"].size() == 2);
}

TEST_CASE("printable shows control characters as escapes and leaves other text as it is", "[cli]") {
    CHECK(printable("plain text, é and └─") == "plain text, é and └─");
    CHECK(printable("a\tb\nc\rd") == "a\\tb\\nc\\rd");
    CHECK(printable(std::string("\x1b[2J\x07\x7f\0end", 10)) == "\\x1b[2J\\x07\\x7f\\x00end");
    // U+009B (CSI) and U+0080 in UTF-8; U+00A0 and a lone 0xc2 at the end are not controls.
    CHECK(printable(std::string("\xc2\x9b") + "31m\xc2\x80\xc2\xa0\xc2") == "\\u009b31m\\u0080\xc2\xa0\xc2");
    CHECK(printable("") == "");
}

TEST_CASE("tasks shows names and errors that hold control characters escaped, one line per task", "[cli]") {
    FakeDaemon daemon([](const json&) {
        return ok({{"tasks",
                    {{{"name", "evil\x1b]0;owned\x07\nID"},
                      {"id", 7},
                      {"kernel", "fill"},
                      {"on", "hb/sub0"},
                      {"state", "failed"},
                      {"error", {{"code", "WORKER_DIED"}, {"message", "line one\nline \x1b[31mtwo"}}}}}}});
    });
    const CliRun r = run({"tasks"}, daemon.socket_path());
    REQUIRE(r.rc == 0);
    CHECK(r.out == "ID  NAME                      KERNEL  ON       STATE   TIME  ERROR\n"
                   " 7  evil\\x1b]0;owned\\x07\\nID  fill    hb/sub0  failed     -  WORKER_DIED: line one\\nline "
                   "\\x1b[31mtwo\n");
}

TEST_CASE("a task's failure and an error reply print control characters escaped on stderr", "[cli]") {
    FakeDaemon daemon([](const json& request) {
        if (request.value("op", "") == "buffer.show") {
            return error("UNKNOWN_BUFFER", "buffer \x1b[8m: no\nsuch buffer");
        }
        return ok({{"task",
                    {{"name", "t\x1b[1A"},
                     {"id", 5},
                     {"state", "failed"},
                     {"error", {{"code", "INVALID_ARGUMENT"}, {"message", "bad\r\x1b[Kgood"}}}}}});
    });
    const CliRun shown = run({"buffer", "show", "x"}, daemon.socket_path());
    CHECK(shown.rc == 1);
    CHECK(shown.err == "canopy: UNKNOWN_BUFFER: buffer \\x1b[8m: no\\nsuch buffer\n");
    const CliRun waited = run({"wait", "5"}, daemon.socket_path());
    CHECK(waited.rc == 1);
    CHECK(waited.err.find("canopy: INVALID_ARGUMENT: task t\\x1b[1A (id 5) failed: bad\\r\\x1b[Kgood\n") !=
          std::string::npos);
    CHECK(waited.err.find('\x1b') == std::string::npos);
}

TEST_CASE("metrics prints the text with a final newline", "[cli]") {
    FakeDaemon daemon(sample_reply);
    CHECK(run({"metrics"}, daemon.socket_path()).out == "canopy_tasks_total 4\n");
    CHECK(json::parse(run({"metrics", "--json"}, daemon.socket_path()).out) == json{{"text", "canopy_tasks_total 4"}});
}

TEST_CASE("shutdown confirms, and prints {} under --json", "[cli]") {
    FakeDaemon daemon(sample_reply);
    CHECK(run({"shutdown"}, daemon.socket_path()).out == "canopyd at " + daemon.socket_path() + " is shutting down\n");
    CHECK(json::parse(run({"shutdown", "--json"}, daemon.socket_path()).out) == json::object());
}

TEST_CASE("the --help flag prints usage and exits 0", "[cli]") {
    const CliRun r = run({"--help"}, "");
    CHECK(r.rc == 0);
    CHECK(r.out.find("Usage: canopy") != std::string::npos);
    CHECK(r.out.find("Exit codes: 0 success") != std::string::npos);
    const CliRun sub = run({"buffer", "create", "--help"}, "");
    CHECK(sub.rc == 0);
    CHECK(sub.out.find("--bytes N REQUIRED") != std::string::npos);
}

TEST_CASE("no command or an unknown one is a usage error", "[cli]") {
    CHECK(run({}, "").rc == 2);
    const CliRun r = run({"frobnicate"}, "");
    CHECK(r.rc == 2);
    CHECK(r.err.find("canopy: USAGE: unknown command \"frobnicate\"") == 0);
    CHECK(run({"status", "extra"}, "").err.find("The following argument was not expected: extra") != std::string::npos);
}
