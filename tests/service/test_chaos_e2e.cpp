// Chaos: clients run graphs on an L4 daemon while a killer SIGKILLs chips, subs, nested nodes, zygotes and
// standbys, one at a time, each once the tree has healed from the last. Every task must end exactly once in
// an allowed state, every kill must be named in the log, the tree must be whole at the end, and SIGTERM must
// leave no shm object behind.

#include "fixture.h"
#include "helpers.h"
#include "tests/proc_support.h"

#include <atomic>
#include <catch2/catch.hpp>
#include <csignal>
#include <mutex>
#include <random>
#include <set>
#include <thread>

using namespace canopy::e2e;
using canopy::testing::children_named;
using canopy::testing::proc_stat;
using canopy::testing::ProcStat;
using nlohmann::json;

namespace {

constexpr auto RUN_FOR = std::chrono::seconds(15);
constexpr std::size_t CHAOS_CLIENTS = 6;
const std::vector<std::string> CHAOS_WORKERS = {"sub0", "n0/chip0", "n0/sub0", "n1/chip0", "n1/sub0"};

json chaos_config() {
    const json node_chips = json::array({{{"device", 0}, {"backend", "sim"}}});
    return {{"node",
             {{"name", "chaos"},
              {"level", 4},
              {"subs", 1},
              {"nodes",
               {{{"name", "n0"}, {"level", 3}, {"chips", node_chips}, {"subs", 1}},
                {{"name", "n1"}, {"level", 3}, {"chips", node_chips}, {"subs", 1}}}}}},
            {"supervision",
             {{"restart_budget", 1000}, {"backoff_initial_ms", 5}, {"backoff_max_ms", 20}, {"drain_timeout_ms", 3000}}},
            {"testing", {{"fault_kernels", true}}},
            {"log", {{"level", "info"}}}};
}

// One request and its reply, given more time than RawClient::request's 5 s: under the sanitizers on a loaded
// machine a reply can take longer while workers restart. Throws when no reply comes.
json ask(RawClient& c, const json& request) {
    c.send_frame(request.dump());
    auto reply = c.read_reply(std::chrono::milliseconds(30000));
    if (!reply) {
        throw std::runtime_error("no reply within 30 s to " + request.dump().substr(0, 80));
    }
    return std::move(*reply);
}

struct Tally {
    std::mutex mu;
    std::set<std::uint64_t> ids;
    std::map<std::string, std::size_t> outcomes; // "completed", "failed WORKER_DIED", ...
    std::vector<std::string> problems;
    std::size_t tasks = 0;
};

// A graph of three tasks over one buffer: a write, then two reads of it, on random workers.
json graph(const std::string& buffer, std::mt19937& rng, std::size_t round) {
    const auto on = [&] { return CHAOS_WORKERS[rng() % CHAOS_WORKERS.size()]; };
    const json whole = tensor_arg(buffer, "output", {256});
    const std::string r = std::to_string(round);
    return {
        {"tasks",
         {task("w" + r, "fill", on(), {whole, float32_arg(1.0)}),
          task("a" + r, "sleep_ms", on(), {tensor_arg(buffer, "input", {128}), int64_arg(static_cast<int>(rng() % 3))}),
          task("b" + r, "sleep_ms", on(),
               {tensor_arg(buffer, "input", {128}, {}, 512), int64_arg(static_cast<int>(rng() % 3))})}}};
}

void chaos_client(const std::string& socket, const std::string& buffer, std::size_t index,
                  const std::atomic<bool>& stop, Tally& tally) {
    std::mt19937 rng(static_cast<std::uint32_t>(index * 7919 + 1));
    try {
        RawClient c(socket);
        for (std::size_t round = 0; !stop; ++round) {
            const json g = graph(buffer, rng, round);
            const auto reply = ask(c, {{"op", "run"}, {"graph", g}, {"wait", true}});
            std::lock_guard lock(tally.mu);
            if (reply.value("ok", false) != true || reply.at("tasks").size() != g.at("tasks").size()) {
                tally.problems.push_back("run: " + reply.dump());
                continue;
            }
            for (const auto& t : reply.at("tasks")) {
                ++tally.tasks;
                const std::string state = t.at("state");
                const std::string key =
                    state == "completed" ? state : state + " " + t.at("error").at("code").get<std::string>();
                ++tally.outcomes[key];
                if (key != "completed" && key != "failed WORKER_DIED" && key != "failed DEPENDENCY_FAILED") {
                    tally.problems.push_back("task ended " + t.dump());
                }
                if (!tally.ids.insert(t.at("id").get<std::uint64_t>()).second) {
                    tally.problems.push_back("task id reported twice: " + t.dump());
                }
            }
        }
    } catch (const std::exception& e) {
        std::lock_guard lock(tally.mu);
        tally.problems.push_back(std::string("client: ") + e.what());
    }
}

bool whole(RawClient& observer, std::size_t workers) {
    const json status = ask(observer, {{"op", "status"}});
    const auto& list = status.at("workers");
    if (list.size() != workers) {
        return false;
    }
    for (const auto& w : list) {
        if (w.at("state") != "running") {
            return false;
        }
    }
    return true;
}

bool wait_whole(RawClient& observer, std::size_t workers, std::chrono::seconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < deadline) {
        if (whole(observer, workers)) {
            return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return false;
}

struct Kill {
    std::string what; // "worker /n0/chip0", "zygote of /", ...
    pid_t pid;
    std::string logged; // the text the log must hold for it
};

// Picks a victim: a worker of the status, or the zygote or standby of the root or of a node. A zygote is
// found as the parent of a worker it forked (a promoted standby is nobody's child in the tree), its
// standby as its child.
std::optional<Kill> pick(RawClient& observer, std::mt19937& rng) {
    const json status = ask(observer, {{"op", "status"}});
    std::vector<Kill> choices;
    std::set<pid_t> zygotes;
    for (const auto& w : status.at("workers")) {
        const pid_t pid = w.at("pid");
        const std::string path = w.at("path");
        if (pid <= 0) {
            continue;
        }
        choices.push_back({"worker " + path, pid, "worker " + path + " (pid " + std::to_string(pid) + ")"});
        const ProcStat st = proc_stat(pid);
        if (st.ppid > 0 && proc_stat(st.ppid).comm == "canopy-zygote") {
            zygotes.insert(st.ppid);
        }
    }
    for (const pid_t z : zygotes) {
        choices.push_back({"zygote " + std::to_string(z), z, "the zygote (pid " + std::to_string(z) + ")"});
        for (const pid_t s : children_named(z, "canopy-standby")) {
            choices.push_back({"standby " + std::to_string(s), s, "standby zygote pid " + std::to_string(s)});
        }
    }
    if (choices.empty()) {
        return std::nullopt;
    }
    return choices[rng() % choices.size()];
}

std::vector<std::string> journal_entries(const std::filesystem::path& state) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::recursive_directory_iterator(state)) {
        if (e.is_regular_file() && e.path().parent_path().filename() == "journal") {
            out.push_back(e.path().filename().string());
        }
    }
    return out;
}

} // namespace

TEST_CASE("chaos: every task ends once while chips, subs, nodes and zygotes are killed", "[service][chaos]") {
    Daemon d(chaos_config());
    const std::size_t workers = 1 + 2 * 3;
    RawClient observer(d.socket());
    REQUIRE(wait_whole(observer, workers, std::chrono::seconds(20)));

    std::vector<std::string> buffers;
    for (std::size_t i = 0; i < CHAOS_CLIENTS; ++i) {
        buffers.push_back(d.create_buffer(1024));
    }
    std::set<std::string> shm_names;
    for (const auto& name : journal_entries(d.dir())) {
        shm_names.insert(name);
    }

    std::atomic<bool> stop{false};
    Tally tally;
    // The clients stop and are joined however this scope ends, a failed REQUIRE included.
    struct Clients {
        std::atomic<bool>& stop;
        std::vector<std::thread> threads;
        void join() {
            stop = true;
            for (auto& t : threads) {
                if (t.joinable()) {
                    t.join();
                }
            }
        }
        ~Clients() { join(); }
    } clients{stop, {}};
    for (std::size_t i = 0; i < CHAOS_CLIENTS; ++i) {
        clients.threads.emplace_back(chaos_client, d.socket(), buffers[i], i, std::cref(stop), std::ref(tally));
    }

    std::mt19937 rng(12345);
    std::vector<Kill> kills;
    const auto end = std::chrono::steady_clock::now() + RUN_FOR;
    while (std::chrono::steady_clock::now() < end) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50 + rng() % 100));
        const auto victim = pick(observer, rng);
        if (victim && victim->pid > 0 && ::kill(victim->pid, SIGKILL) == 0) {
            kills.push_back(*victim);
        }
        INFO("after killing " << (victim ? victim->what : "nothing") << "\n" << d.log());
        REQUIRE(wait_whole(observer, workers, std::chrono::seconds(20)));
    }
    clients.join();

    INFO(d.log());
    for (const auto& p : tally.problems) {
        FAIL_CHECK(p);
    }
    CHECK(tally.ids.size() == tally.tasks);
    CHECK(tally.outcomes["completed"] > 0);
    CHECK(kills.size() >= 20);
    const std::string log = d.log();
    for (const auto& k : kills) {
        INFO(k.what);
        CHECK(log.find(k.logged) != std::string::npos);
    }
    CHECK(wait_whole(observer, workers, std::chrono::seconds(20)));
    UNSCOPED_INFO("outcomes: " << json(tally.outcomes).dump() << ", kills: " << kills.size());
    // A kill's effects can trail it (a nested node's zygote killed restarts that node's workers once the node has
    // noticed): the daemon ends healthy once they have settled, as `canopy status` reports it.
    Output status;
    for (int i = 0; i < 100 && status.rc != 0; ++i) {
        if (i > 0) {
            std::this_thread::sleep_for(std::chrono::milliseconds(200));
        }
        status = d.cli({"status"});
    }
    INFO("status: " << status.out << status.err);
    CHECK(status.rc == 0);

    CHECK(d.stop() == 0);
    CHECK(journal_entries(d.dir()).empty());
    for (const auto& name : shm_names) {
        CHECK_FALSE(std::filesystem::exists("/dev/shm/" + name));
    }
}
