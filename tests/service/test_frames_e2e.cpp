// Bad clients on the control socket (docs/control-protocol.md "Framing"): malformed, oversized, truncated
// and stalled frames get an error reply or a closed connection, and never disturb other clients.

#include "fixture.h"
#include "helpers.h"

#include <catch2/catch.hpp>

using namespace canopy::e2e;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

void check_bad_request(const std::optional<json>& reply, const std::string& message_part = "") {
    REQUIRE(reply.has_value());
    INFO(reply->dump());
    CHECK(reply->at("ok") == false);
    CHECK(reply->at("error").at("code") == "BAD_REQUEST");
    CHECK_THAT(reply->at("error").at("message").get<std::string>(), Catch::Contains(message_part));
}

// A fresh connection answers `status`.
void check_serving(const Daemon& d) {
    RawClient c(d.socket());
    const json reply = c.request({{"op", "status"}, {"id", 1}});
    CHECK(reply.at("ok") == true);
    CHECK(reply.at("id") == 1);
}

json submit_sleep(const std::string& on, std::int64_t ms, bool wait, int id) {
    return {{"op", "submit"}, {"id", id}, {"wait", wait}, {"task", sleep_task("sleep", on, ms)}};
}

// Every misbehaviour of this file, one after the other, each on its own connection.
void misbehave(const Daemon& d) {
    {
        RawClient c(d.socket());
        c.send_frame("this is not JSON");
        check_bad_request(c.read_reply());
        c.send_frame("[1, 2, 3]");
        check_bad_request(c.read_reply());
    }
    {
        RawClient c(d.socket());
        c.send_bytes(length_prefix(1u << 30));
        check_bad_request(c.read_reply());
    }
    {
        RawClient c(d.socket());
        c.send_bytes(length_prefix(0));
        check_bad_request(c.read_reply());
    }
    {
        RawClient c(d.socket());
        c.send_bytes(length_prefix(100) + "0123456789");
    }
}

} // namespace

TEST_CASE("a frame body that is not JSON gets BAD_REQUEST and the connection stays usable", "[service]") {
    Daemon d(e2e_config(1, 1));
    RawClient c(d.socket());
    c.send_frame("{\"op\": \"status\", garbage");
    const auto reply = c.read_reply();
    check_bad_request(reply, "not a JSON object");
    CHECK_FALSE(reply->contains("id"));
    const json status = c.request({{"op", "status"}, {"id", "after"}});
    CHECK(status.at("ok") == true);
    CHECK(status.at("id") == "after");
    CHECK(status.at("workers").size() == 2);
}

TEST_CASE("JSON that is not an object, an unknown op or a missing op gets BAD_REQUEST on an open connection",
          "[service]") {
    Daemon d(e2e_config(1, 1));
    RawClient c(d.socket());
    for (const std::string body : {"[1, 2]", "\"status\"", "42", "null", "true"}) {
        INFO(body);
        c.send_frame(body);
        check_bad_request(c.read_reply(), "not a JSON object");
    }
    const json unknown = c.request({{"op", "frobnicate"}, {"id", 7}});
    check_bad_request(unknown, "frobnicate");
    CHECK(unknown.at("id") == 7);
    const json missing = c.request({{"id", 8}, {"bytes", 64}});
    check_bad_request(missing, "op");
    CHECK(missing.at("id") == 8);
    check_bad_request(c.request({{"op", 5}}), "op");
    CHECK(c.request({{"op", "status"}}).at("ok") == true);
}

TEST_CASE("a frame length of 1 GiB gets BAD_REQUEST and the connection is closed", "[service]") {
    Daemon d(e2e_config(1, 1));
    RawClient c(d.socket());
    c.send_bytes(length_prefix(1u << 30));
    check_bad_request(c.read_reply(), "1073741824");
    CHECK(c.closed_by_peer());
    check_serving(d);
}

TEST_CASE("frame lengths of 0 and 1 get BAD_REQUEST and the connection is closed", "[service]") {
    Daemon d(e2e_config(1, 1));
    for (const std::uint32_t n : {0u, 1u}) {
        INFO("length " << n);
        RawClient c(d.socket());
        c.send_bytes(length_prefix(n) + std::string(n, '{'));
        check_bad_request(c.read_reply(), "frame length " + std::to_string(n));
        CHECK(c.closed_by_peer());
    }
    check_serving(d);
}

TEST_CASE("a frame of exactly the 1 MiB limit is served and one byte more is refused", "[service]") {
    Daemon d(e2e_config(1, 1));
    constexpr std::uint32_t LIMIT = 1024 * 1024; // control.max_frame_bytes default
    std::string body = json{{"op", "status"}, {"id", "big"}}.dump();
    body.resize(LIMIT, ' ');
    RawClient c(d.socket());
    c.send_frame(body);
    const auto reply = c.read_reply();
    REQUIRE(reply.has_value());
    CHECK(reply->at("id") == "big");
    CHECK(reply->at("ok") == true);

    RawClient over(d.socket());
    over.send_bytes(length_prefix(LIMIT + 1));
    check_bad_request(over.read_reply(), std::to_string(LIMIT + 1));
    CHECK(over.closed_by_peer());
}

TEST_CASE("a truncated frame from a client that goes away leaves the daemon serving others", "[service]") {
    Daemon d(e2e_config(1, 1));
    RawClient other(d.socket());
    {
        RawClient gone(d.socket());
        gone.send_bytes(length_prefix(100) + "0123456789");
        gone.close_write();
        REQUIRE(gone.closed_by_peer()); // the daemon has read the end of the stream and dropped the connection
    }
    CHECK(other.request({{"op", "status"}}).at("ok") == true);
    check_serving(d);
}

TEST_CASE("a client stalled mid-frame does not delay another client's request", "[service]") {
    Daemon d(e2e_config(1, 1));
    const std::string body = json{{"op", "status"}, {"id", "slow"}}.dump();
    RawClient slow(d.socket());
    slow.send_bytes(length_prefix(static_cast<std::uint32_t>(body.size())) + body.substr(0, body.size() / 2));

    RawClient quick(d.socket());
    const auto start = std::chrono::steady_clock::now();
    quick.send_frame(json{{"op", "status"}, {"id", "quick"}}.dump());
    const auto reply = quick.read_reply(2000ms);
    REQUIRE(reply.has_value());
    CHECK(reply->at("id") == "quick");
    CHECK(std::chrono::steady_clock::now() - start < 2s);

    // The stalled frame completes and is answered normally, and that answer is the first frame on its connection:
    // nothing was sent for the half frame (an early reply would be read here instead, without the id "slow").
    slow.send_bytes(body.substr(body.size() / 2));
    const auto late = slow.read_reply();
    REQUIRE(late.has_value());
    CHECK(late->at("id") == "slow");
    CHECK(late->at("ok") == true);
}

TEST_CASE("replies on one connection come in request order even when an earlier request waits", "[service]") {
    Daemon d(e2e_config(1, 1));
    RawClient c(d.socket());
    c.send_frame(submit_sleep("chip0", 300, true, 1).dump());
    c.send_frame(json{{"op", "status"}, {"id", 2}}.dump());
    const auto first = c.read_reply();
    const auto second = c.read_reply();
    REQUIRE(first.has_value());
    REQUIRE(second.has_value());
    CHECK(first->at("id") == 1);
    CHECK(first->at("task").at("state") == "completed");
    CHECK(second->at("id") == 2);
}

TEST_CASE("bad clients do not disturb a good client's running task", "[service]") {
    Daemon d(e2e_config(2, 2));
    RawClient good(d.socket());
    good.send_frame(submit_sleep("chip0", 1500, true, 1).dump());
    REQUIRE(wait_task_started(d, "sleep") == "running"); // before the bad clients start

    RawClient stalled(d.socket());
    stalled.send_bytes(length_prefix(64) + "{\"op\": \"sta");
    misbehave(d);
    check_serving(d);

    const auto reply = good.read_reply(5000ms);
    REQUIRE(reply.has_value());
    INFO(reply->dump());
    CHECK(reply->at("id") == 1);
    const json& t = reply->at("task");
    CHECK(t.at("state") == "completed");
    CHECK(t.at("end_ns").get<std::uint64_t>() - t.at("start_ns").get<std::uint64_t>() >= 1'500'000'000u);
    const json status = good.request({{"op", "status"}});
    CHECK(worker_at(status, "/chip0").at("restarts") == 0);
    CHECK(worker_at(status, "/chip0").at("tasks_failed") == 0);
}

TEST_CASE("submit, run and wait requests with bad arguments get BAD_REQUEST and the daemon keeps serving",
          "[service]") {
    const std::vector<json> bodies = {
        {{"op", "submit"}, {"id", 1}},
        {{"op", "run"}, {"id", 1}, {"graph", {{"tasks", "none"}}}},
        {{"op", "wait"}, {"id", 1}, {"task_id", -1}},
        {{"op", "wait"}, {"id", 1}, {"task_id", 424242}},
    };
    for (const auto& body : bodies) {
        INFO(body.dump());
        Daemon d(e2e_config(1, 1));
        RawClient c(d.socket());
        c.send_frame(body.dump());
        const auto reply = c.read_reply();
        CHECK(reply.has_value());
        if (reply) {
            check_bad_request(reply);
        }
        CHECK(d.cli({"status"}).rc == 0);
    }
}

TEST_CASE("a device buffer waiting for its busy chip does not hold up other clients", "[service][transfer]") {
    Daemon d(e2e_config(2, 2));
    RawClient busy(d.socket());
    busy.send_frame(submit_sleep("chip0", 1500, true, 1).dump());
    REQUIRE(wait_task_started(d, "sleep") == "running");
    // chip0 makes the buffer after its queued sleep: the reply waits for it.
    RawClient creator(d.socket());
    creator.send_frame(
        json{{"op", "buffer.create"}, {"id", 2}, {"bytes", 4096}, {"backend", "vmm"}, {"on", "chip0"}}.dump());
    // Meanwhile another client is served, and its reply comes while the creation still waits: before the sleep
    // ends (start_ns and end_ns are CLOCK_MONOTONIC, as is monotonic_now_ns()).
    RawClient other(d.socket());
    const json status = other.request({{"op", "status"}});
    const auto served_ns = monotonic_now_ns();
    CHECK(status.at("ok") == true);
    const auto created = creator.read_reply(5000ms);
    const auto created_ns = monotonic_now_ns();
    REQUIRE(created.has_value());
    INFO(created->dump());
    CHECK(created->at("id") == 2);
    CHECK(created->at("buffer").at("backend") == "sim_vmm");
    const auto slept = busy.read_reply(5000ms);
    REQUIRE(slept.has_value());
    CHECK(slept->at("task").at("state") == "completed");
    const auto slept_end_ns = slept->at("task").at("end_ns").get<std::uint64_t>();
    CHECK(served_ns < slept_end_ns);
    CHECK(created_ns > slept_end_ns);
}

TEST_CASE("frames sent in one write, and one frame sent a byte at a time, are each answered in order", "[service]") {
    Daemon d(e2e_config(1, 1));
    RawClient c(d.socket());
    auto framed = [](const json& body) {
        const std::string text = body.dump();
        return length_prefix(static_cast<std::uint32_t>(text.size())) + text;
    };
    // Three requests and half of a fourth in one write; the rest of the fourth later.
    const std::string fourth = framed({{"op", "status"}, {"id", 4}});
    std::string batch = framed({{"op", "status"}, {"id", 1}}) + framed(submit_sleep("chip0", 0, true, 2)) +
                        framed({{"op", "no-such-op"}, {"id", 3}}) + fourth.substr(0, fourth.size() / 2);
    c.send_bytes(batch);
    for (int id = 1; id <= 3; ++id) {
        const auto reply = c.read_reply();
        REQUIRE(reply.has_value());
        CHECK(reply->at("id") == id);
        CHECK(reply->at("ok") == (id != 3));
    }
    c.send_bytes(fourth.substr(fourth.size() / 2));
    const auto last = c.read_reply();
    REQUIRE(last.has_value());
    CHECK(last->at("id") == 4);

    const std::string slow = framed(submit_sleep("sub0", 0, true, 5));
    for (const char byte : slow) {
        c.send_bytes(std::string(1, byte));
    }
    const auto reply = c.read_reply();
    REQUIRE(reply.has_value());
    CHECK(reply->at("id") == 5);
    CHECK(reply->at("task").at("state") == "completed");
}

TEST_CASE("a client that pipelines more requests than the daemon keeps pending gets every reply in order",
          "[service]") {
    Daemon d(e2e_config(1, 1));
    RawClient c(d.socket());
    constexpr int N = 3 * 64; // three times ControlServer::MAX_PENDING
    std::string batch;
    for (int id = 1; id <= N; ++id) {
        const std::string body = submit_sleep(id % 2 == 0 ? "chip0" : "sub0", 0, true, id).dump();
        batch += length_prefix(static_cast<std::uint32_t>(body.size())) + body;
    }
    c.send_bytes(batch);
    for (int id = 1; id <= N; ++id) {
        const auto reply = c.read_reply();
        REQUIRE(reply.has_value());
        CHECK(reply->at("id") == id);
        CHECK(reply->at("task").at("state") == "completed");
    }
    check_serving(d);
}
