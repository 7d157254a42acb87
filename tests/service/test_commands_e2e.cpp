// Every CLI command's happy path against a real daemon, in human output and with --json.

#include "fixture.h"
#include "helpers.h"

#include <catch2/catch.hpp>
#include <cstring>

using namespace canopy::e2e;
using nlohmann::json;

namespace {

const std::vector<std::string> ALL_WORKERS = {"/chip0", "/chip1", "/sub0", "/sub1"};

std::vector<float> floats_of(const std::string& bytes) {
    std::vector<float> out(bytes.size() / sizeof(float));
    std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
    return out;
}

// The buffer's first `n` float32 values, read through the CLI.
std::vector<float> read_floats(const Daemon& d, const std::string& id, std::size_t n) {
    TempDir files;
    const auto path = (files.path / "floats.bin").string();
    const auto r = d.cli({"buffer", "read", id, "--to", path, "--bytes", std::to_string(n * sizeof(float))});
    REQUIRE(r.rc == 0);
    return floats_of(read_file(path));
}

} // namespace

TEST_CASE("status shows every worker of the tree as a table and as JSON", "[service]") {
    Daemon d(e2e_config(2, 2));
    const auto human = d.cli({"status"});
    REQUIRE(human.rc == 0);
    CHECK_THAT(human.out, Catch::Contains("node e2e (level 3)"));
    CHECK_THAT(human.out, Catch::Contains("canopyd pid " + std::to_string(d.pid())));
    for (const std::string name : {"chip0", "chip1", "sub0", "sub1"}) {
        CHECK_THAT(human.out, Catch::Contains("─ " + name));
    }
    CHECK_THAT(human.out, Catch::Contains("sim:0"));
    CHECK_THAT(human.out, Catch::Contains("sim:1"));

    const json status = d.cli_json({"status"});
    CHECK(status.at("pid") == d.pid());
    CHECK(status.at("node").at("name") == "e2e");
    REQUIRE(status.at("workers").size() == ALL_WORKERS.size());
    for (const auto& path : ALL_WORKERS) {
        const json& w = worker_at(status, path);
        CHECK(w.at("kind") == (path.rfind("/chip", 0) == 0 ? "chip" : "sub"));
        CHECK(w.at("pid").get<int>() > 0);
        CHECK(w.at("pid") != d.pid());
        CHECK(w.at("state") == "running");
    }
}

TEST_CASE("buffer create makes shm, vmm and symmetric buffers that list and show report", "[service]") {
    Daemon d(e2e_config(2, 2));
    const auto human = d.cli({"buffer", "create", "--bytes", "4K"});
    REQUIRE(human.rc == 0);
    CHECK_THAT(human.out, Catch::Contains("backend  posix_shm"));
    CHECK_THAT(human.out, Catch::Contains("4.0 KiB (4096)"));

    const json shm = d.cli_json({"buffer", "create", "--bytes", "8192", "--access", "r"});
    CHECK(shm.at("backend") == "posix_shm");
    CHECK(shm.at("nbytes") == 8192);
    CHECK(shm.at("access") == "r");
    CHECK(shm.at("creator") == "/");

    const json vmm = d.cli_json({"buffer", "create", "--bytes", "1M", "--backend", "vmm", "--on", "chip0"});
    CHECK(vmm.at("backend") == "sim_vmm");
    CHECK(vmm.at("nbytes") == 1024 * 1024);
    CHECK(vmm.at("access") == "rw");
    CHECK(vmm.at("creator") == "/chip0");

    const json sym =
        d.cli_json({"buffer", "create", "--bytes", "4096", "--backend", "symmetric", "--world", "chip0,chip1"});
    CHECK(sym.at("backend") == "sim_vmm");
    CHECK(sym.at("world") == json::array({"/chip0", "/chip1"}));

    const json list = d.cli_json({"buffer", "list"});
    std::vector<std::string> ids;
    for (const auto& b : list.at("buffers")) {
        ids.push_back(b.at("id").get<std::string>());
    }
    CHECK(ids.size() == 4);
    for (const json* b : {&shm, &vmm, &sym}) {
        CHECK(std::find(ids.begin(), ids.end(), b->at("id").get<std::string>()) != ids.end());
        CHECK(d.cli_json({"buffer", "show", b->at("id").get<std::string>()}) == *b);
    }

    const auto table = d.cli({"buffer", "list"});
    REQUIRE(table.rc == 0);
    CHECK_THAT(table.out, Catch::StartsWith("ID"));
    CHECK_THAT(table.out, Catch::Contains(vmm.at("id").get<std::string>() + "  sim_vmm"));
    CHECK_THAT(table.out, Catch::Contains("/chip0,/chip1"));
    const auto shown = d.cli({"buffer", "show", sym.at("id").get<std::string>()});
    REQUIRE(shown.rc == 0);
    CHECK_THAT(shown.out, Catch::Contains(sym.at("id").get<std::string>()));
    CHECK_THAT(shown.out, Catch::Contains("sim_vmm"));
}

TEST_CASE("buffer write and read round-trip a file byte for byte as attachments where no fd is handed out",
          "[service]") {
    // A preloaded arena has no fd (buffer.fd is BAD_REQUEST), so the CLI moves its bytes as attachments, one request
    // each way; a posix_shm buffer goes through its fd in one request (test_buffer_fd_e2e.cpp).
    Daemon d(e2e_config(2, 2, {{"preload", {{{"name", "scratch"}, {"backend", "fork_shm"}, {"bytes", 4194304}}}}}));
    TempDir files;
    const std::string id = "scratch";
    const std::size_t offset = 1000;                              // not chunk-aligned
    const std::string data = pattern_bytes(1536 * 1024 + 123, 7); // 1.5 MiB + 123
    const auto in = write_file(files.path, "in.bin", data);

    const json wrote = d.cli_json({"buffer", "write", id, "--from", in, "--offset", std::to_string(offset)});
    CHECK(wrote.at("written") == data.size());
    CHECK(wrote.at("offset") == offset);
    CHECK(wrote.at("requests").get<int>() == 1);

    const auto out = (files.path / "out.bin").string();
    const json read = d.cli_json({"buffer", "read", id, "--to", out, "--offset", std::to_string(offset), "--bytes",
                                  std::to_string(data.size())});
    CHECK(read.at("bytes") == data.size());
    CHECK(read.at("requests").get<int>() == 1);
    const std::string back = read_file(out);
    REQUIRE(back.size() == data.size());
    CHECK(back == data);

    // Without --bytes the read runs to the buffer's end: zeros around the written range.
    const auto whole = (files.path / "whole.bin").string();
    const auto human = d.cli({"buffer", "read", id, "--to", whole});
    REQUIRE(human.rc == 0);
    CHECK_THAT(human.out, Catch::Contains("read 4194304 bytes of " + id + " at offset 0 into " + whole));
    const std::string all = read_file(whole);
    REQUIRE(all.size() == 4u * 1024 * 1024);
    CHECK(all.substr(0, offset) == std::string(offset, '\0'));
    CHECK(all.substr(offset, data.size()) == data);
    CHECK(all.substr(offset + data.size()) == std::string(all.size() - offset - data.size(), '\0'));

    // An empty file still sends one write.
    const json empty = d.cli_json({"buffer", "write", id, "--from", write_file(files.path, "empty.bin", "")});
    CHECK(empty.at("written") == 0);
    CHECK(empty.at("requests") == 1);

    const auto again = d.cli({"buffer", "write", id, "--from", in});
    REQUIRE(again.rc == 0);
    CHECK_THAT(again.out, Catch::Contains("wrote " + std::to_string(data.size()) + " bytes to " + id));
}

TEST_CASE("buffer release removes the buffer from the list and later uses see it as stale", "[service]") {
    Daemon d(e2e_config(2, 2));
    const std::string kept = d.create_buffer(4096);
    const std::string gone = d.create_buffer(4096);
    const auto human = d.cli({"buffer", "release", gone});
    REQUIRE(human.rc == 0);
    CHECK_THAT(human.out, Catch::Contains("released " + gone));
    CHECK(d.cli_json({"buffer", "release", kept}) == json::object());
    CHECK(d.cli_json({"buffer", "list"}).at("buffers").empty());
    const auto show = d.cli({"buffer", "show", gone, "--json"});
    CHECK(show.rc == 1);
    CHECK(error_code_of(show.json()) == "STALE_BUFFER");
}

TEST_CASE("submit runs a task with --wait, and without it wait ID returns the finished task", "[service]") {
    Daemon d(e2e_config(2, 2));
    const std::string id = d.create_buffer(4096);

    const auto waited =
        d.cli({"submit", "fill", "--on", "chip0", "--out", id + ":float32:1024", "--scalar", "float32:1.5", "--wait"});
    REQUIRE(waited.rc == 0);
    CHECK(has_row(waited.out, {"fill", "fill", "chip0", "completed"}));
    for (const float v : read_floats(d, id, 1024)) {
        REQUIRE(v == 1.5f);
    }

    const json queued = d.cli_json({"submit", "iota", "--on", "sub0", "--out", id + ":float32:256"});
    CHECK(queued.at("kernel") == "iota");
    CHECK(queued.at("on") == "sub0");
    const auto state = queued.at("state").get<std::string>();
    CHECK((state == "queued" || state == "running" || state == "completed"));
    const std::string task_id = std::to_string(queued.at("id").get<std::uint64_t>());
    const json done = d.cli_json({"wait", task_id});
    CHECK(done.at("id") == queued.at("id"));
    CHECK(done.at("state") == "completed");
    CHECK(done.at("end_ns").get<std::uint64_t>() >= done.at("start_ns").get<std::uint64_t>());
    CHECK(done.at("start_ns").get<std::uint64_t>() > 0);
    const auto values = read_floats(d, id, 1024);
    for (std::size_t i = 0; i < values.size(); ++i) {
        REQUIRE(values[i] == (i < 256 ? static_cast<float>(i) : 1.5f));
    }
    const auto human = d.cli({"wait", task_id});
    REQUIRE(human.rc == 0);
    CHECK(has_row(human.out, {task_id, "iota", "iota", "sub0", "completed"}));
}

TEST_CASE("run --wait runs a graph file to completion and tasks lists its tasks", "[service]") {
    Daemon d(e2e_config(2, 2));
    TempDir files;
    const std::string id = d.create_buffer(4096);
    const json graph = {{"tasks",
                         {task("init", "fill", "chip1", {tensor_arg(id, "output", {512}), float32_arg(1.5)}),
                          task("double", "scale", "sub1", {tensor_arg(id, "inout", {512}), float32_arg(2.0)})}}};
    const auto path = write_file(files.path, "graph.json", graph.dump());

    const json run = d.cli_json({"run", path, "--wait"});
    REQUIRE(run.at("tasks").size() == 2);
    for (const auto& t : run.at("tasks")) {
        CHECK(t.at("state") == "completed");
    }
    CHECK(task_named(run, "double").at("start_ns") >= task_named(run, "init").at("end_ns"));
    for (const float v : read_floats(d, id, 512)) {
        REQUIRE(v == 3.0f);
    }

    const auto human = d.cli({"run", path, "--wait"});
    REQUIRE(human.rc == 0);
    CHECK(has_row(human.out, {"init", "fill", "chip1", "completed"}));
    CHECK(has_row(human.out, {"double", "scale", "sub1", "completed"}));

    const json listing = d.cli_json({"tasks"});
    REQUIRE(listing.at("tasks").size() == 4);
    for (const auto& t : listing.at("tasks")) {
        CHECK(t.at("state") == "completed");
    }
    CHECK(listing.at("tasks")[0].at("id") == task_named(run, "init").at("id"));
    const auto table = d.cli({"tasks"});
    REQUIRE(table.rc == 0);
    CHECK_THAT(table.out, Catch::StartsWith("ID"));
    CHECK(has_row(table.out, {"double", "scale", "sub1", "completed"}));
}

TEST_CASE("metrics prints Prometheus text with task totals and per-worker lines", "[service]") {
    Daemon d(e2e_config(2, 2));
    REQUIRE(d.cli({"submit", "sleep_ms", "--on", "sub1", "--scalar", "int64:0", "--wait"}).rc == 0);
    const auto human = d.cli({"metrics"});
    REQUIRE(human.rc == 0);
    const std::string text = d.cli_json({"metrics"}).at("text").get<std::string>();
    for (const std::string* t : {&human.out, &text}) {
        CHECK_THAT(*t, Catch::Contains("# TYPE canopy_tasks_total counter"));
        CHECK_THAT(*t, Catch::Contains("canopy_tasks_total{state=\"completed\"} 1"));
        for (const auto& w : ALL_WORKERS) {
            CHECK_THAT(*t, Catch::Contains("canopy_worker_up{worker=\"" + w + "\""));
        }
        CHECK_THAT(*t, Catch::Contains("canopy_worker_tasks_total{worker=\"/sub1\",result=\"completed\"} 1"));
    }
}

TEST_CASE("module load of a PTX file is refused with NO_CONSUMER when no chip is cuda", "[service]") {
    Daemon d(e2e_config(2, 2));
    TempDir files;
    const auto ptx = write_file(files.path, "dummy.ptx", ".version 7.0\n.target sm_80\n.address_size 64\n");
    const auto human = d.cli({"module", "load", "dummy", ptx});
    CHECK(human.rc == 1);
    CHECK_THAT(human.err, Catch::StartsWith("canopy: NO_CONSUMER: "));
    const auto out = d.cli({"module", "load", "dummy", ptx, "--json"});
    CHECK(out.rc == 1);
    CHECK(error_code_of(out.json()) == "NO_CONSUMER");
    CHECK(d.cli({"status"}).rc == 0);
}

TEST_CASE("shutdown stops the daemon with exit status 0 and removes its socket", "[service]") {
    Daemon d(e2e_config(2, 2));
    const auto out = d.cli({"shutdown"});
    REQUIRE(out.rc == 0);
    CHECK_THAT(out.out, Catch::Contains("canopyd at " + d.socket() + " is shutting down"));
    const auto status = d.wait_exit(std::chrono::seconds(15));
    REQUIRE(status.has_value());
    CHECK(*status == 0);
    CHECK_FALSE(std::filesystem::exists(d.socket()));
    CHECK(d.cli({"status"}).rc == 3);
}

TEST_CASE("shutdown --json prints an empty object", "[service]") {
    Daemon d(e2e_config(1, 1));
    const auto out = d.cli({"shutdown", "--json"});
    REQUIRE(out.rc == 0);
    CHECK(out.json() == json::object());
    CHECK(d.wait_exit(std::chrono::seconds(15)) == std::optional<int>(0));
}

TEST_CASE("buffer write and read --json name the buffer as documented", "[service]") {
    Daemon d(e2e_config(1, 1));
    TempDir files;
    const std::string id = d.create_buffer(4096);
    const auto in = write_file(files.path, "in.bin", pattern_bytes(100, 1));
    const json wrote = d.cli_json({"buffer", "write", id, "--from", in});
    const json read = d.cli_json({"buffer", "read", id, "--to", (files.path / "out.bin").string()});
    CHECK(wrote.value("buffer", json()) == id);
    CHECK(read.value("buffer", json()) == id);
}

TEST_CASE("releasing a buffer does not count as a task done by any worker", "[service]") {
    Daemon d(e2e_config(2, 2));
    const std::string id = d.create_buffer(4096);
    const json status = d.cli_json({"status"});
    const auto before = tasks_done_sum(status);
    REQUIRE(d.cli({"buffer", "release", id}).rc == 0);
    // Each worker takes the release before any later task (one queue per worker, run in order), so once one
    // task has finished on every worker, each has handled the release and only those tasks count.
    for (const auto& w : status.at("workers")) {
        REQUIRE(d.cli({"submit", "sleep_ms", "--on", w.at("path").get<std::string>(), "--scalar", "int64:0", "--wait"})
                    .rc == 0);
    }
    CHECK(tasks_done_sum(d.cli_json({"status"})) == before + status.at("workers").size());
}

TEST_CASE("a client waiting for a task when shutdown arrives gets the drained task's final state", "[service]") {
    Daemon d(e2e_config(1, 1));
    RawClient waiter(d.socket());
    waiter.send_frame(
        json{{"op", "submit"}, {"id", 1}, {"wait", true}, {"task", sleep_task("drained", "sub0", 1000)}}.dump());
    REQUIRE(wait_task_started(d, "drained") == "running");
    REQUIRE(d.cli({"shutdown"}).rc == 0);
    const auto reply = waiter.read_reply(std::chrono::milliseconds(10000));
    CHECK(d.wait_exit(std::chrono::seconds(15)) == std::optional<int>(0));
    REQUIRE(reply.has_value());
    CHECK(reply->at("task").at("state") == "completed");
}

TEST_CASE("a shutdown with a task in flight and no client connected ends when the task does, not at the deadline",
          "[service]") {
    Daemon d(e2e_config(1, 1)); // drain_timeout_ms 5000
    REQUIRE(d.cli({"submit", "sleep_ms", "--on", "sub0", "--scalar", "int64:300"}).rc == 0);
    REQUIRE(wait_task_started(d, "sleep_ms") == "running");
    const auto asked = std::chrono::steady_clock::now();
    REQUIRE(d.cli({"shutdown"}).rc == 0);
    CHECK(d.wait_exit(std::chrono::seconds(15)) == std::optional<int>(0));
    // The task's 300 ms, the children's exit and the connections' close, far below the 5 s deadline.
    CHECK(std::chrono::steady_clock::now() - asked < std::chrono::milliseconds(3500));
}

TEST_CASE("buffer read and write wait for the tasks that touch their bytes, and later tasks wait for them",
          "[service][transfer]") {
    Daemon d(e2e_config(2, 2));
    TempDir files;
    const std::string x = d.create_buffer(4096);
    const std::string y = d.create_buffer(4096);
    // hold X, then fill it with 7; submitted without waiting.
    const json fill_later = {{"tasks",
                              {sleep_task("hold", "sub0", 300, {tensor_arg(x, "inout", {1024})}),
                               task("seven", "fill", "chip0", {tensor_arg(x, "output", {1024}), float32_arg(7)})}}};
    REQUIRE(d.cli({"run", write_file(files.path, "fill.json", fill_later.dump())}).rc == 0);
    // The read comes after both tasks (it reads what they write).
    for (const float v : read_floats(d, x, 1024)) {
        REQUIRE(v == 7.0f);
    }
    // hold X, then copy X to Y; a write to X must wait for the copy that reads it.
    const json copy_later = {
        {"tasks",
         {sleep_task("hold", "sub0", 300, {tensor_arg(x, "input", {1024})}),
          task("copy", "copy", "chip1", {tensor_arg(x, "input", {1024}), tensor_arg(y, "output", {1024})})}}};
    REQUIRE(d.cli({"run", write_file(files.path, "copy.json", copy_later.dump())}).rc == 0);
    std::string bytes(4096, '\0');
    for (std::size_t i = 0; i < 1024; ++i) {
        const float five = 5.0f;
        std::memcpy(bytes.data() + 4 * i, &five, 4);
    }
    REQUIRE(d.cli({"buffer", "write", x, "--from", write_file(files.path, "fives.bin", bytes)}).rc == 0);
    // A task submitted after the write sees it.
    REQUIRE(
        d.cli({"submit", "scale", "--on", "sub1", "--inout", x + ":float32:1024", "--scalar", "float32:2", "--wait"})
            .rc == 0);
    for (const float v : read_floats(d, y, 1024)) {
        REQUIRE(v == 7.0f); // the copy ran before the write
    }
    for (const float v : read_floats(d, x, 1024)) {
        REQUIRE(v == 10.0f);
    }
    // Transfers are not tasks to `canopy tasks`.
    const json listing = d.cli_json({"tasks"});
    for (const auto& t : listing.at("tasks")) {
        CHECK(t.at("kernel") != "buffer.read");
        CHECK(t.at("kernel") != "buffer.write");
    }
}

TEST_CASE("a transfer still queued when the daemon stops gets an error reply, not silence", "[service][transfer]") {
    Daemon d(e2e_config(1, 1, json{{"supervision", {{"drain_timeout_ms", 300}}}}));
    const std::string x = d.create_buffer(4096);
    RawClient holder(d.socket());
    holder.send_frame(
        json{{"op", "submit"}, {"id", 1}, {"task", sleep_task("hold", "sub0", 3000, {tensor_arg(x, "inout", {1024})})}}
            .dump());
    REQUIRE(holder.read_reply().has_value());
    RawClient reader(d.socket());
    reader.send_frame(json{{"op", "buffer.read"}, {"id", 2}, {"buffer", x}, {"bytes", 16}}.dump());
    REQUIRE(d.cli({"shutdown"}).rc == 0);
    const auto reply = reader.read_reply(std::chrono::milliseconds(10000));
    REQUIRE(reply.has_value());
    INFO(reply->dump());
    CHECK(reply->at("ok") == false);
    CHECK(reply->at("error").at("code") == "WORKER_DIED");
    CHECK_THAT(reply->at("error").at("message").get<std::string>(), Catch::Contains("before the transfer ran"));
}
