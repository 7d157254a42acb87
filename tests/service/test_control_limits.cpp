// The bounds of the control socket (docs/control-protocol.md "Limits"), on a ControlServer run in this
// process with small limits: the frame and idle timeouts, the connection limit and its reserve for the
// daemon's own uid, and the reply byte budget.

#include "daemon/control_server.h"
#include "fixture.h"
#include "helpers.h"
#include "log_lines.h"
#include "tests/skip.h"

#include <catch2/catch.hpp>
#include <future>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>

using namespace canopy::e2e;
using canopy::daemon::ControlLimits;
using canopy::daemon::ControlOptions;
using canopy::daemon::ControlServer;
using canopy::daemon::Peer;
using canopy::daemon::Reply;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

// Answers {"op": "echo"} with {"echo": ID} and {"op": "big", "bytes": N} with {"data": N letters}; holds
// the reply to {"op": "hold"} until release_held().
class Handler {
public:
    void operator()(const json& request, const Peer&, Reply reply) {
        ++handled_;
        const std::string op = request.value("op", "");
        if (op == "hold") {
            std::lock_guard lock(mu_);
            held_.push_back(std::move(reply));
            return;
        }
        if (op == "big") {
            const auto n = request.at("bytes").get<std::size_t>();
            reply(json{{"data", std::string(n, static_cast<char>('a' + request.at("id").get<int>() % 26))}});
            return;
        }
        reply(json{{"echo", request.value("id", json())}});
    }
    void release_held() {
        std::lock_guard lock(mu_);
        for (auto& reply : held_) {
            reply(json{{"released", true}});
        }
        held_.clear();
    }
    std::size_t held() {
        std::lock_guard lock(mu_);
        return held_.size();
    }
    std::size_t handled() const { return handled_; }

private:
    std::atomic<std::size_t> handled_{0};
    std::mutex mu_;
    std::vector<Reply> held_;
};

// A ControlServer on a private socket, served by its own io thread.
class Server {
public:
    explicit Server(const ControlLimits& limits, std::vector<std::uint32_t> allow_uids = {})
        : socket_((dir_.path / "control.sock").string()), log_(make_line_logger("control", sink_)),
          server_(
              io_, ControlOptions{socket_, std::move(allow_uids), {}, 1u << 20, limits},
              [this](const json& r, canopy::daemon::RawRun*, const Peer& p, Reply reply, canopy::daemon::Attachment) {
                  handler_(r, p, std::move(reply));
              },
              log_) {
        server_.start();
        thread_ = std::thread([this] { io_.run(); });
    }
    ~Server() {
        boost::asio::post(io_, [this] { server_.stop(); });
        guard_.reset();
        io_.stop();
        thread_.join();
    }
    const std::string& socket() const { return socket_; }
    Handler& handler() { return handler_; }
    LineSink& log() { return *sink_; }
    // The connections the server holds, read on its io thread.
    std::size_t connections() {
        std::promise<std::size_t> n;
        boost::asio::post(io_, [&] { n.set_value(server_.connections()); });
        return n.get_future().get();
    }
    // Waits up to `limit` for connections() to be `n`.
    bool wait_connections(std::size_t n, std::chrono::milliseconds limit = 5000ms) {
        const auto deadline = std::chrono::steady_clock::now() + limit;
        while (connections() != n) {
            if (std::chrono::steady_clock::now() > deadline) {
                return false;
            }
            std::this_thread::sleep_for(5ms);
        }
        return true;
    }

private:
    TempDir dir_;
    std::string socket_;
    std::shared_ptr<LineSink> sink_;
    std::shared_ptr<spdlog::logger> log_;
    Handler handler_;
    boost::asio::io_context io_;
    boost::asio::executor_work_guard<boost::asio::io_context::executor_type> guard_{io_.get_executor()};
    ControlServer server_;
    std::thread thread_;
};

ControlLimits short_limits() {
    ControlLimits limits;
    limits.frame_timeout = 300ms;
    limits.idle_timeout = 300ms;
    return limits;
}

void check_echo(RawClient& c, int id) {
    const json reply = c.request({{"op", "echo"}, {"id", id}});
    CHECK(reply.at("ok") == true);
    CHECK(reply.at("echo") == id);
}

} // namespace

TEST_CASE("a frame left incomplete past the frame timeout gets BAD_REQUEST and the connection is closed",
          "[service][limits]") {
    ControlLimits limits;
    limits.frame_timeout = 300ms;
    Server server(limits);
    RawClient body(server.socket());
    body.send_bytes(length_prefix(100) + "0123456789");
    RawClient prefix(server.socket());
    prefix.send_bytes(length_prefix(100).substr(0, 2));

    const auto late_body = body.read_reply();
    REQUIRE(late_body.has_value());
    CHECK(late_body->at("error").at("code") == "BAD_REQUEST");
    CHECK(late_body->at("error").at("message") ==
          "frame incomplete after 300 ms: 14 of its 104 bytes arrived; closing the connection");
    CHECK(body.closed_by_peer());
    const auto late_prefix = prefix.read_reply();
    REQUIRE(late_prefix.has_value());
    CHECK(late_prefix->at("error").at("message") ==
          "frame incomplete after 300 ms: 2 of its 4 length bytes arrived; closing the connection");
    CHECK(prefix.closed_by_peer());

    RawClient other(server.socket());
    check_echo(other, 1);
}

TEST_CASE("a connection that sends nothing is closed after the idle timeout without a reply", "[service][limits]") {
    ControlLimits limits;
    limits.idle_timeout = 300ms;
    Server server(limits);
    RawClient silent(server.socket());
    const auto start = std::chrono::steady_clock::now();
    CHECK(silent.closed_by_peer(5000ms)); // EOF with no byte before it
    CHECK(std::chrono::steady_clock::now() - start >= 300ms);
    CHECK(server.wait_connections(0));
}

TEST_CASE("a session waiting for a slow reply outlives the idle and frame timeouts, then idles out",
          "[service][limits]") {
    Server server(short_limits());
    RawClient waiting(server.socket());
    waiting.send_frame(json{{"op", "hold"}, {"id", "slow"}}.dump());
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (server.handler().held() == 0 && std::chrono::steady_clock::now() < deadline) {
        std::this_thread::sleep_for(5ms);
    }
    REQUIRE(server.handler().held() == 1);
    std::this_thread::sleep_for(1500ms); // five times each timeout, with the request outstanding
    server.handler().release_held();
    const auto reply = waiting.read_reply();
    REQUIRE(reply.has_value());
    CHECK(reply->at("id") == "slow");
    CHECK(reply->at("released") == true);
    // Owing nothing now, the session is idle and closes.
    CHECK(waiting.closed_by_peer(5000ms));
}

TEST_CASE("a client that keeps sending requests is never idle", "[service][limits]") {
    Server server(short_limits());
    RawClient busy(server.socket());
    const auto until = std::chrono::steady_clock::now() + 1500ms;
    int id = 0;
    while (std::chrono::steady_clock::now() < until) {
        check_echo(busy, ++id);
        std::this_thread::sleep_for(100ms); // a third of the idle timeout between requests
    }
    CHECK(id >= 10);
}

TEST_CASE("connections past max_sessions get BAD_REQUEST at once and are closed, and a closed one frees its place",
          "[service][limits]") {
    ControlLimits limits;
    limits.max_sessions = 3;
    limits.own_uid_reserve = 0;
    Server server(limits);
    std::vector<std::unique_ptr<RawClient>> open;
    for (int i = 0; i < 3; ++i) {
        open.push_back(std::make_unique<RawClient>(server.socket()));
        check_echo(*open.back(), i);
    }
    for (int i = 0; i < 2; ++i) {
        RawClient over(server.socket());
        const auto refusal = over.read_reply();
        REQUIRE(refusal.has_value());
        CHECK(refusal->at("ok") == false);
        CHECK(refusal->at("error").at("code") == "BAD_REQUEST");
        CHECK(refusal->at("error").at("message") ==
              "the daemon serves at most 3 connections at once (control socket); closing this one");
        CHECK(over.closed_by_peer());
    }
    CHECK(server.log().count("3 connections open, the most it serves") == 1);

    open.pop_back();
    REQUIRE(server.wait_connections(2));
    RawClient again(server.socket());
    check_echo(again, 7);
    for (auto& c : open) {
        check_echo(*c, 8);
    }
}

TEST_CASE("the daemon's own uid is served past max_sessions up to its reserve", "[service][limits]") {
    if (::geteuid() != 0) {
        CANOPY_SKIP("needs root to connect as another uid");
    }
    constexpr uid_t OTHER = 65534;
    ControlLimits limits;
    limits.max_sessions = 2;
    limits.own_uid_reserve = 2;
    Server server(limits, {OTHER});
    // A child of another uid takes every place below max_sessions and one more, which it is refused.
    int ready[2];
    int hold[2];
    REQUIRE(::pipe(ready) == 0);
    REQUIRE(::pipe(hold) == 0);
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(ready[0]);
        ::close(hold[1]);
        if (::setgid(OTHER) != 0 || ::setuid(OTHER) != 0) {
            ::_exit(2);
        }
        RawClient a(server.socket());
        RawClient b(server.socket());
        const bool served =
            a.request({{"op", "echo"}}).at("ok") == true && b.request({{"op", "echo"}}).at("ok") == true;
        RawClient over(server.socket());
        const auto refusal = over.read_reply();
        const bool refused = refusal && refusal->at("error").at("code") == "BAD_REQUEST";
        const char verdict = served && refused ? 'y' : 'n';
        (void)::write(ready[1], &verdict, 1);
        char c;
        (void)::read(hold[0], &c, 1); // until the parent closes its end
        ::_exit(0);
    }
    ::close(ready[1]);
    ::close(hold[0]);
    char verdict = 0;
    REQUIRE(::read(ready[0], &verdict, 1) == 1);
    CHECK(verdict == 'y');
    CHECK(server.connections() == 2);

    RawClient own1(server.socket());
    check_echo(own1, 1);
    RawClient own2(server.socket());
    check_echo(own2, 2);
    RawClient own3(server.socket());
    const auto refusal = own3.read_reply();
    REQUIRE(refusal.has_value());
    CHECK(refusal->at("error").at("message") ==
          "the daemon serves at most 2 connections at once (control socket); closing this one");

    ::close(hold[1]);
    ::close(ready[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    CHECK(WIFEXITED(status));
}

TEST_CASE("a client that pipelines requests without reading stops being read at the reply byte budget, and then gets "
          "every reply in order",
          "[service][limits]") {
    ControlLimits limits;
    limits.max_queued_reply_bytes = 1u << 20;
    Server server(limits);
    constexpr int N = 300;
    // 32 replies pass the budget, before the 64 owed replies (MAX_PENDING) that stop reading too.
    constexpr std::size_t REPLY = 32 * 1024;
    RawClient pipelining(server.socket());
    std::string batch;
    for (int id = 1; id <= N; ++id) {
        const std::string body = json{{"op", "big"}, {"id", id}, {"bytes", REPLY}}.dump();
        batch += length_prefix(static_cast<std::uint32_t>(body.size())) + body;
    }
    pipelining.send_bytes(batch);
    REQUIRE(server.log().wait_for("reading no further request until it reads them", 5000ms));
    // Replies taken: the budget's worth, those the socket buffers hold, and at most MAX_PENDING in hand.
    const std::size_t bound = limits.max_queued_reply_bytes / REPLY + ControlServer::MAX_PENDING + 16;
    CHECK(server.handler().handled() <= bound);

    RawClient other(server.socket());
    check_echo(other, 1);
    CHECK(server.handler().handled() <= bound + 1);

    for (int id = 1; id <= N; ++id) {
        const auto reply = pipelining.read_reply();
        REQUIRE(reply.has_value());
        REQUIRE(reply->at("id") == id);
        const std::string data = reply->at("data").get<std::string>();
        CHECK(data.size() == REPLY);
        CHECK(data.front() == static_cast<char>('a' + id % 26));
    }
    CHECK(server.handler().handled() == N + 1);
    CHECK(server.log().count("reading no further request") == 1);
}
