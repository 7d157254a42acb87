// The daemon's limits end to end (docs/control-protocol.md "Limits"): running out of file descriptors,
// the reply byte budget of a connection that does not read, buffers over the size limit and larger than
// the free space of /dev/shm. Each refusal is checked by its exact error, and the daemon keeps serving.

#include "fixture.h"
#include "helpers.h"
#include "probes.h"
#include "tests/skip.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <poll.h>
#include <sched.h>
#include <sstream>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <thread>
#include <unistd.h>

using namespace canopy::e2e;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// Lowers the limit of file descriptors of the calling process to `n`, soft and hard.
std::function<bool()> fd_limit(rlim_t n) {
    return [n] {
        rlimit limit{};
        ::getrlimit(RLIMIT_NOFILE, &limit);
        // The hard limit too: canopyd raises its soft limit to the hard one at start.
        limit.rlim_cur = n;
        limit.rlim_max = n;
        return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
    };
}

// Gives the calling process a private mount namespace with a tmpfs of `bytes` on /dev/shm.
std::function<bool()> small_dev_shm(std::uint64_t bytes) {
    return [bytes] {
        const std::string options = "size=" + std::to_string(bytes);
        return ::unshare(CLONE_NEWNS) == 0 && ::mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
               ::mount("tmpfs", "/dev/shm", "tmpfs", 0, options.c_str()) == 0;
    };
}

// Lines of the daemon's log that contain `part`.
std::size_t log_count(const Daemon& d, const std::string& part) {
    const std::string log = d.log();
    std::size_t n = 0;
    for (auto at = log.find(part); at != std::string::npos; at = log.find(part, at + 1)) {
        ++n;
    }
    return n;
}

// Waits up to `limit` for the daemon's log to hold `part`.
bool wait_for_log(const Daemon& d, const std::string& part, std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (log_count(d, part) == 0) {
        if (std::chrono::steady_clock::now() > deadline) {
            return false;
        }
        std::this_thread::sleep_for(20ms);
    }
    return true;
}

json create_request(std::uint64_t bytes, const std::string& backend = "shm") {
    json request = {{"op", "buffer.create"}, {"id", "create"}, {"bytes", bytes}, {"backend", backend}};
    if (backend == "vmm") {
        request["on"] = "chip0";
    } else if (backend == "symmetric") {
        request["world"] = {"chip0", "chip1"};
    }
    return request;
}

void check_refused(const json& reply, const std::string& message) {
    INFO(reply.dump());
    CHECK(reply.at("ok") == false);
    CHECK(reply.at("error").at("code") == "BAD_REQUEST");
    CHECK(reply.at("error").at("message") == message);
}

std::vector<std::string> files_in(const std::filesystem::path& dir) {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir)) {
        names.push_back(entry.path().filename().string());
    }
    return names;
}

} // namespace

TEST_CASE("while accepts fail for want of file descriptors canopyd stays idle, fails a buffer create by name, "
          "and serves again once descriptors are freed",
          "[service][limits]") {
#ifdef CANOPY_SANITIZED // the sanitizer build: ASan and UBSan together
    CANOPY_SKIP("UBSan's vptr check needs a free file descriptor, which this test takes away");
#endif
    const int port = free_port();
    json config = e2e_config(1, 1);
    config["metrics"] = {{"listen", "127.0.0.1:" + std::to_string(port)}};
    Daemon d(config, {}, fd_limit(96));
    RawClient first(d.socket());
    REQUIRE(first.request({{"op", "status"}}).at("ok") == true);

    // More connections than the daemon has descriptors left: the rest wait in the listen backlog.
    const std::size_t spare = 96 - std::min<std::size_t>(96, open_fds(d.pid()));
    std::vector<std::unique_ptr<RawClient>> hogs;
    for (std::size_t i = 0; i < spare + 40; ++i) {
        hogs.push_back(std::make_unique<RawClient>(d.socket()));
    }
    REQUIRE(wait_for_log(d, "accept failed: Too many open files", 10s));
    INFO(d.log());

    // A metrics request waits in its listener's backlog meanwhile.
    const int scrape = tcp_connect(port);
    const std::string get = "GET /metrics HTTP/1.0\r\n\r\n";
    REQUIRE(::send(scrape, get.data(), get.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(get.size()));

    // The acceptors pause instead of spinning: well under a third of a core over a second.
    const double cpu_before = cpu_seconds(d.pid());
    const auto window_start = std::chrono::steady_clock::now();
    std::this_thread::sleep_for(1s);
    const double cpu = cpu_seconds(d.pid()) - cpu_before;
    const double window = std::chrono::duration<double>(std::chrono::steady_clock::now() - window_start).count();
    CHECK(cpu < 0.3 * window);

    // A request that needs a descriptor fails by name; the connection and the daemon carry on.
    check_refused(first.request(create_request(4096)),
                  "buffer create: no file descriptor left in canopyd (open(journal entry): Too many open files)");
    CHECK(files_in(d.dir() / "state" / "journal").empty());
    CHECK(first.request({{"op", "status"}}).at("ok") == true);

    hogs.clear();
    RawClient later(d.socket());
    CHECK(later.request({{"op", "status"}, {"id", "later"}}).at("id") == "later");
    const json created = first.request(create_request(4096));
    CHECK(created.at("ok") == true);
    CHECK(created.at("buffer").at("nbytes") == 4096);

    pollfd pfd{scrape, POLLIN, 0};
    REQUIRE(::poll(&pfd, 1, 5000) == 1);
    char head[16] = {};
    CHECK(::recv(scrape, head, sizeof head - 1, 0) > 0);
    CHECK(std::string(head).rfind("HTTP/1.0 200 OK", 0) == 0);
    ::close(scrape);

    CHECK(log_count(d, "control socket " + d.socket() + ": accept failed: Too many open files") == 1);
    CHECK(log_count(d, "control socket " + d.socket() + ": accepting again after") == 1);
    CHECK(log_count(d, "metrics listener 127.0.0.1:" + std::to_string(port) + ": accept failed") == 1);
    CHECK(log_count(d, "metrics listener 127.0.0.1:" + std::to_string(port) + ": accepting again after") == 1);
}

TEST_CASE("a client that pipelines 600 buffer reads and reads none keeps canopyd's memory bounded while another "
          "client is served, then gets every reply in order",
          "[service][limits][transfer]") {
    // The session takes no request while 64 replies are owed or its queued replies pass the byte budget, and
    // logs once they have passed it; N requests are enough for their replies to pass it.
#if defined(CANOPY_SANITIZED) || defined(CANOPY_TSAN)
    // Under the sanitizers the daemon and this client move base64 about 25 times slower, and ASan's shadow
    // memory blurs RSS: replies of 64 KiB (about 8.5 MiB of base64 in all) against a budget of 1 MiB cross it
    // the same way, and the bound on memory is checked by the normal build alone. Every wait is longer too.
    constexpr int N = 100;
    constexpr std::uint64_t CHUNK = 64 * 1024;
    constexpr bool CHECK_RSS = false;
    constexpr auto WAIT = 90s;
    Daemon d(e2e_config(1, 1, {{"control", {{"max_queued_reply_bytes", 1 << 20}}}}));
#else
    constexpr int N = 600;                      // about 420 MiB of base64 replies, against a budget of 16 MiB
    constexpr std::uint64_t CHUNK = 512 * 1024; // the most one buffer.read returns
    constexpr bool CHECK_RSS = true;
    constexpr auto WAIT = 30s;
    Daemon d(e2e_config(1, 1));
#endif
    constexpr int OFFSETS = 16;
    const std::string id = d.create_buffer(CHUNK * OFFSETS);
    const std::string file = write_file(d.dir(), "pattern.bin", pattern_bytes(CHUNK * OFFSETS, 7));
    REQUIRE(d.cli({"buffer", "write", id, "--from", file}).rc == 0);
    auto read_request = [&](int n) {
        return json{{"op", "buffer.read"},
                    {"id", n},
                    {"buffer", id},
                    {"offset", static_cast<std::uint64_t>(n % OFFSETS) * CHUNK},
                    {"bytes", CHUNK}};
    };
    // One reply of each offset, from a client that reads.
    std::vector<std::string> expected;
    {
        RawClient reference(d.socket());
        for (int n = 0; n < OFFSETS; ++n) {
            expected.push_back(reference.request(read_request(n)).at("data").get<std::string>());
        }
    }
    const std::uint64_t baseline = rss_bytes(d.pid());

    RawClient greedy(d.socket());
    std::string batch;
    for (int n = 0; n < N; ++n) {
        const std::string body = read_request(n).dump();
        std::string frame(4, '\0');
        for (std::size_t i = 0; i < 4; ++i) {
            frame[i] = static_cast<char>((body.size() >> (8 * i)) & 0xff);
        }
        batch += frame + body;
    }
    // The sender blocks once the daemon stops reading; on a failure the socket's shutdown releases it.
    struct Sender {
        RawClient& client;
        std::thread thread;
        ~Sender() {
            ::shutdown(client.fd(), SHUT_RDWR);
            thread.join();
        }
    } sender{greedy, std::thread([&] { greedy.send_bytes(batch); })};
    REQUIRE(wait_for_log(d, "bytes of replies queued; reading no further request until it reads them", WAIT));
    CHECK((!CHECK_RSS || rss_bytes(d.pid()) < baseline + 200 * 1024 * 1024));

    // The other client's reply comes after the replies the daemon is still making for the greedy one, which
    // under the sanitizers on a loaded machine can take longer than read_reply's default of 5 s.
    RawClient other(d.socket());
    other.send_frame(json{{"op", "status"}, {"id", "other"}}.dump());
    const auto answer = other.read_reply(WAIT);
    REQUIRE(answer.has_value());
    CHECK(answer->at("id") == "other");
    CHECK(d.cli({"status"}).rc == 0);
    CHECK((!CHECK_RSS || rss_bytes(d.pid()) < baseline + 200 * 1024 * 1024));

    for (int n = 0; n < N; ++n) {
        const auto reply = greedy.read_reply(10000ms);
        REQUIRE(reply.has_value());
        REQUIRE(reply->at("id") == n);
        REQUIRE(reply->at("ok") == true);
        CHECK(reply->at("data").get<std::string>() == expected[static_cast<std::size_t>(n % OFFSETS)]);
    }
}

TEST_CASE("a buffer over 2^48 bytes is refused with BAD_REQUEST naming the size and the limit, for every backend",
          "[service][limits]") {
    Daemon d(e2e_config(2, 1));
    RawClient c(d.socket());
    constexpr std::uint64_t HUGE_SIZE = std::uint64_t{1} << 62;
    for (const std::string backend : {"shm", "vmm", "symmetric"}) {
        INFO(backend);
        check_refused(c.request(create_request(HUGE_SIZE, backend)),
                      "buffer create: 4611686018427387904 bytes is over the limit of 281474976710656 bytes (2^48) "
                      "per buffer");
    }
    const auto cli = d.cli({"buffer", "create", "--bytes", std::to_string(HUGE_SIZE), "--json"});
    CHECK(cli.rc == 1);
    CHECK(error_code_of(cli.json()) == "BAD_REQUEST");
    CHECK(c.request(create_request(4096, "vmm")).at("ok") == true);
    CHECK(d.cli({"status"}).rc == 0);
}

TEST_CASE("a shm buffer larger than the free space of /dev/shm is refused by name and leaves nothing behind",
          "[service][limits]") {
    if (::geteuid() != 0) {
        CANOPY_SKIP("needs root to mount a small tmpfs over /dev/shm in a private mount namespace");
    }
    constexpr std::uint64_t MIB = 1024 * 1024;
    Daemon d(e2e_config(1, 1), {}, small_dev_shm(16 * MIB));
    const std::filesystem::path shm = "/proc/" + std::to_string(d.pid()) + "/root/dev/shm"; // the daemon's view
    RawClient c(d.socket());
    check_refused(c.request(create_request(64 * MIB)),
                  "buffer create: /dev/shm has no room for 67108864 bytes (posix_fallocate: No space left on device)");
    CHECK(files_in(shm).empty());
    CHECK(files_in(d.dir() / "state" / "journal").empty());
    // The size limit itself passes the size check; /dev/shm has no room for it either.
    check_refused(c.request(create_request(std::uint64_t{1} << 48)),
                  "buffer create: /dev/shm has no room for 281474976710656 bytes (posix_fallocate: No space left on "
                  "device)");

    // What fits is created, reserved and usable.
    const std::string id = d.create_buffer(4 * MIB);
    const std::string data = pattern_bytes(4 * MIB, 3);
    const std::string in = write_file(d.dir(), "in.bin", data);
    REQUIRE(d.cli({"buffer", "write", id, "--from", in}).rc == 0);
    const std::string out = (d.dir() / "out.bin").string();
    REQUIRE(d.cli({"buffer", "read", id, "--to", out}).rc == 0);
    CHECK(read_file(out) == data);
    CHECK(files_in(shm).size() == 1);

    // 4 MiB of 16 are reserved: 14 MiB more do not fit.
    const auto cli = d.cli({"buffer", "create", "--bytes", std::to_string(14 * MIB), "--json"});
    CHECK(cli.rc == 1);
    CHECK(error_code_of(cli.json()) == "BAD_REQUEST");
    CHECK(error_message_of(cli.json()) ==
          "buffer create: /dev/shm has no room for 14680064 bytes (posix_fallocate: No space left on device)");
    CHECK(files_in(shm).size() == 1);
    CHECK(files_in(d.dir() / "state" / "journal").size() == 1);
    CHECK(d.cli({"status"}).rc == 0);
}

TEST_CASE("canopyd raises its soft limit of open files to the hard limit", "[service][limits]") {
    const auto soft_below_hard = [] {
        rlimit limit{};
        ::getrlimit(RLIMIT_NOFILE, &limit);
        limit.rlim_max = std::min<rlim_t>(limit.rlim_max, 4096);
        limit.rlim_cur = 256;
        return ::setrlimit(RLIMIT_NOFILE, &limit) == 0;
    };
    Daemon d(e2e_config(1, 0), {}, soft_below_hard);
    std::ifstream in("/proc/" + std::to_string(d.pid()) + "/limits");
    std::string line;
    std::string open_files;
    while (std::getline(in, line)) {
        if (line.rfind("Max open files", 0) == 0) {
            open_files = line;
        }
    }
    INFO(open_files);
    std::istringstream fields(open_files.substr(std::string("Max open files").size()));
    rlim_t soft = 0;
    rlim_t hard = 0;
    fields >> soft >> hard;
    CHECK(hard <= 4096);
    CHECK(soft == hard);
}
