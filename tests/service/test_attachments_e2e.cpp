// Attachments through a real daemon (docs/control-protocol.md, "Attachments"): buffer.write carries its bytes
// raw after the frame and buffer.read answers with them raw after the reply, whole buffers in one request; every
// refusal discards the bytes and leaves the connection usable, except a count over the limit or one that cannot be
// trusted and an attachment that stops arriving, which close it.
#include "fixture.h"
#include "helpers.h"
#include "ipc/mapped_region.h"
#include "probes.h"
#include "tests/skip.h"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <sys/wait.h>
#include <unistd.h>

using namespace canopy::e2e;
using nlohmann::json;

namespace {

// A request frame of buffer.write with `bytes` as its attachment.
json write_request(const std::string& buffer, std::uint64_t offset, std::size_t size) {
    return {{"op", "buffer.write"}, {"buffer", buffer}, {"offset", offset}, {"attachment", size}};
}

json write_bytes(RawClient& c, const std::string& buffer, std::uint64_t offset, const std::string& bytes) {
    c.send_frame(write_request(buffer, offset, bytes.size()).dump());
    c.send_bytes(bytes);
    const auto reply = c.read_reply(std::chrono::milliseconds(30000));
    REQUIRE(reply.has_value());
    return *reply;
}

// The reply to a buffer.read asking for an attachment, and the bytes after it.
std::pair<json, std::string> read_bytes(RawClient& c, const std::string& buffer, std::uint64_t offset,
                                        std::optional<std::uint64_t> bytes = std::nullopt) {
    json request = {{"op", "buffer.read"}, {"buffer", buffer}, {"offset", offset}, {"attachment", true}};
    if (bytes) {
        request["bytes"] = *bytes;
    }
    const json reply = c.request(request);
    if (reply.at("ok") != true) {
        return {reply, ""};
    }
    auto data = c.read_bytes(reply.at("attachment").get<std::size_t>(), std::chrono::milliseconds(30000));
    REQUIRE(data.has_value());
    return {reply, *data};
}

std::string create(RawClient& c, std::uint64_t bytes, const json& extra = json::object()) {
    json request = {{"op", "buffer.create"}, {"bytes", bytes}};
    request.update(extra);
    const json reply = c.request(request);
    REQUIRE(reply.at("ok") == true);
    return reply.at("buffer").at("id");
}

// The frame of a `status` request with id "smuggled": bytes that a daemon which did not discard an attachment would
// take for a request.
std::string smuggled_frame() {
    const std::string body = json{{"op", "status"}, {"id", "smuggled"}}.dump();
    std::string frame(4, '\0');
    frame[0] = static_cast<char>(body.size());
    return frame + body;
}

// The connection still speaks frames: the next request's reply is its own.
void check_usable(RawClient& c) {
    const json next = c.request({{"op", "buffer.list"}, {"id", "next"}});
    CHECK(next.at("id") == "next");
    CHECK(next.at("ok") == true);
}

} // namespace

TEST_CASE("a 64 MiB buffer is written and read back through attachments in one request each, byte for byte",
          "[service][attachment]") {
    Daemon d(e2e_config(1, 1));
    RawClient c(d.socket());
    constexpr std::size_t SIZE = 64u << 20;
    const std::string id = create(c, SIZE);
    const std::string content = pattern_bytes(SIZE, 7);
    const json written = write_bytes(c, id, 0, content);
    CHECK(written == json{{"ok", true}, {"written", SIZE}});
    const auto [reply, back] = read_bytes(c, id, 0);
    CHECK(reply == json{{"ok", true}, {"attachment", SIZE}, {"rest", 0}});
    CHECK(back.size() == SIZE);
    CHECK(back == content);
    check_usable(c);
}

TEST_CASE("a sim_vmm buffer is written and read through attachments at an unaligned offset", "[service][attachment]") {
    Daemon d(e2e_config(1, 1));
    RawClient c(d.socket());
    const std::string id = create(c, 1u << 20, {{"backend", "vmm"}, {"on", "chip0"}});
    const std::string content = pattern_bytes(10000, 3);
    CHECK(write_bytes(c, id, 4097, content) == json{{"ok", true}, {"written", 10000}});
    const auto [reply, back] = read_bytes(c, id, 4097, 10000);
    CHECK(reply.at("rest") == (1u << 20) - 4097 - 10000);
    CHECK(back == content);
    const auto [whole_reply, whole] = read_bytes(c, id, 0);
    REQUIRE(whole.size() == 1u << 20);
    CHECK(whole.substr(0, 4097) == std::string(4097, '\0'));
    CHECK(whole.substr(4097, 10000) == content);
}

TEST_CASE("attachment transfers are ordered with the tasks over their bytes", "[service][attachment]") {
    Daemon d(e2e_config(0, 1));
    RawClient c(d.socket());
    const std::string id = create(c, 4096);
    // A read right after a submit without waiting sees what the task wrote.
    REQUIRE(c.request({{"op", "submit"}, {"task", sleep_task("hold", "sub0", 300)}}).at("ok") == true);
    REQUIRE(c.request({{"op", "submit"},
                       {"task", task("fill", "fill", "sub0", {tensor_arg(id, "output", {1024}), float32_arg(2.5)})}})
                .at("ok") == true);
    const auto [reply, bytes] = read_bytes(c, id, 0);
    REQUIRE(bytes.size() == 4096);
    const auto* values = reinterpret_cast<const float*>(bytes.data());
    CHECK(values[0] == 2.5f);
    CHECK(values[1023] == 2.5f);
    // A write waits for an earlier task that reads its bytes.
    REQUIRE(
        c.request({{"op", "submit"}, {"task", sleep_task("reader", "sub0", 300, {tensor_arg(id, "input", {1024})})}})
            .at("ok") == true);
    CHECK(write_bytes(c, id, 0, std::string(4096, 'x')).at("written") == 4096);
    const std::uint64_t answered = monotonic_now_ns();
    const json tasks = c.request({{"op", "tasks"}});
    const json& reader = task_named(tasks, "reader");
    CHECK(reader.at("state") == "completed");
    CHECK(reader.at("end_ns").get<std::uint64_t>() <= answered);
}

TEST_CASE("an empty attachment writes nothing, empty reads say what is left, and the connection stays usable",
          "[service][attachment]") {
    Daemon d(e2e_config(0, 1));
    RawClient c(d.socket());
    const std::string id = create(c, 4096);
    CHECK(write_bytes(c, id, 4096, "") == json{{"ok", true}, {"written", 0}});
    CHECK(read_bytes(c, id, 4096).first == json{{"ok", true}, {"attachment", 0}, {"rest", 0}});
    CHECK(read_bytes(c, id, 10, 0).first == json{{"ok", true}, {"attachment", 0}, {"rest", 4086}});
    check_usable(c);
}

TEST_CASE("a read past the end of the buffer is cut short and says so", "[service][attachment]") {
    Daemon d(e2e_config(0, 1));
    RawClient c(d.socket());
    const std::string id = create(c, 4096);
    const std::string content = pattern_bytes(4096, 11);
    REQUIRE(write_bytes(c, id, 0, content).at("ok") == true);
    const auto [cut, tail] = read_bytes(c, id, 4000, 5000);
    CHECK(cut == json{{"ok", true}, {"attachment", 96}, {"rest", 0}, {"short", true}});
    CHECK(tail == content.substr(4000));
    const auto [whole, middle] = read_bytes(c, id, 100, 50);
    CHECK(whole == json{{"ok", true}, {"attachment", 50}, {"rest", 3946}});
    CHECK(middle == content.substr(100, 50));
    const auto [past, none] = read_bytes(c, id, 5000, 1);
    CHECK(past.at("error") ==
          json{{"code", "BAD_REQUEST"}, {"message", "offset 5000 is past the end of the 4096-byte buffer"}});
    check_usable(c);
}

TEST_CASE("refused attachment requests get their exact error, their bytes are discarded and the connection stays "
          "usable",
          "[service][attachment]") {
    Daemon d(e2e_config(0, 1));
    RawClient c(d.socket());
    const std::string id = create(c, 4096);
    const std::string released = create(c, 4096);
    REQUIRE(c.request({{"op", "buffer.release"}, {"buffer", released}}).at("ok") == true);
    const std::string smuggled = smuggled_frame();
    struct Case {
        const char* what;
        json request;
        std::size_t bytes; // sent after the frame: the smuggled frame, padded
        const char* code;
        std::string message;
    };
    const std::vector<Case> cases = {
        {"unknown buffer", write_request("nope", 0, 64), 64, "UNKNOWN_BUFFER",
         "buffer: no buffer 'nope' (not a buffer ID nor a preloaded arena's name)"},
        {"released buffer", write_request(released, 0, 64), 64, "STALE_BUFFER",
         "buffer: buffer " + released + " was released"},
        {"past the end", write_request(id, 0, 5000), 5000, "BAD_REQUEST",
         "writing 5000 bytes at offset 0 runs past the end of the 4096-byte buffer"},
        {"offset past the end", write_request(id, 4097, 64), 64, "BAD_REQUEST",
         "offset 4097 is past the end of the 4096-byte buffer"},
        {"data beside an attachment",
         {{"op", "buffer.write"}, {"buffer", id}, {"data", "AAAA"}, {"attachment", 64}},
         64,
         "BAD_REQUEST",
         "data and attachment exclude each other"},
        {"attachment on status",
         {{"op", "status"}, {"attachment", 64}},
         64,
         "BAD_REQUEST",
         "attachment: op \"status\" takes no attachment (only buffer.write does); its 64 bytes are discarded"},
        {"byte count on buffer.read",
         {{"op", "buffer.read"}, {"buffer", id}, {"attachment", 64}},
         64,
         "BAD_REQUEST",
         "attachment: op \"buffer.read\" takes no attachment (only buffer.write does); its 64 bytes are discarded"},
        {"attachment true on status",
         {{"op", "status"}, {"attachment", true}},
         0,
         "BAD_REQUEST",
         "attachment: op \"status\" takes no attachment (only buffer.write does, and buffer.read asks for one)"},
        {"attachment not a boolean on buffer.read",
         {{"op", "buffer.read"}, {"buffer", id}, {"attachment", "yes"}},
         0,
         "BAD_REQUEST",
         "attachment: expected true or false, got \"yes\""},
    };
    for (const Case& k : cases) {
        INFO(k.what);
        json request = k.request;
        request["id"] = k.what;
        c.send_frame(request.dump());
        std::string payload = smuggled;
        payload.resize(std::max(k.bytes, payload.size()), ' ');
        payload.resize(k.bytes);
        c.send_bytes(payload);
        const auto reply = c.read_reply();
        REQUIRE(reply.has_value());
        CHECK(reply->at("id") == k.what);
        CHECK(reply->at("error") == json{{"code", k.code}, {"message", k.message}});
        check_usable(c);
    }
    // Nothing was written.
    CHECK(read_bytes(c, id, 0).second == std::string(4096, '\0'));
}

TEST_CASE("an attachment write to another uid's buffer is refused ACCESS_DENIED and its bytes discarded",
          "[service][attachment][access]") {
    if (::geteuid() != 0) {
        CANOPY_SKIP("needs root to run a client as another uid");
    }
    Daemon d(e2e_config(0, 1, {{"control", {{"allow_uids", {OWNER_UID, OTHER_UID}}}}}));
    const Output created = d.cli({"buffer", "create", "--bytes", "4096", "--json"}, OWNER_UID);
    REQUIRE(created.rc == 0);
    const std::string id = created.json().at("id");
    int verdict[2];
    REQUIRE(::pipe(verdict) == 0);
    const pid_t child = ::fork();
    if (child == 0) {
        ::close(verdict[0]);
        std::string report = "setuid failed";
        if (::setgid(OTHER_UID) == 0 && ::setuid(OTHER_UID) == 0) {
            RawClient c(d.socket());
            c.send_frame(write_request(id, 0, 64).dump());
            c.send_bytes(std::string(64, 'x'));
            const auto refused = c.read_reply();
            const json next = c.request({{"op", "buffer.list"}, {"id", "next"}});
            report = (refused ? refused->dump() : std::string("closed")) + "\n" + next.at("id").dump();
        }
        (void)::write(verdict[1], report.data(), report.size());
        ::_exit(0);
    }
    ::close(verdict[1]);
    std::string report;
    char chunk[512];
    for (ssize_t n; (n = ::read(verdict[0], chunk, sizeof chunk)) > 0;) {
        report.append(chunk, static_cast<std::size_t>(n));
    }
    ::close(verdict[0]);
    int status = 0;
    ::waitpid(child, &status, 0);
    const auto newline = report.find('\n');
    REQUIRE(newline != std::string::npos);
    const json refused = json::parse(report.substr(0, newline));
    CHECK(refused.at("error") ==
          json{{"code", "ACCESS_DENIED"},
               {"message",
                "buffer.write: buffer " + id + " belongs to uid 65534; uid 65533 may not write the bytes of it"}});
    CHECK(report.substr(newline + 1) == "\"next\"");
}

TEST_CASE("an attachment over control.max_attachment_bytes, or a count that is not one, closes the connection",
          "[service][attachment][limits]") {
    Daemon d(e2e_config(0, 1, {{"control", {{"max_attachment_bytes", 1024}}}}));
    RawClient setup(d.socket());
    const std::string id = create(setup, 4096);
    {
        RawClient c(d.socket());
        CHECK(write_bytes(c, id, 0, std::string(1024, 'a')).at("written") == 1024);
        c.send_frame(write_request(id, 0, 1025).dump());
        const auto reply = c.read_reply();
        REQUIRE(reply.has_value());
        CHECK(reply->at("error") ==
              json{{"code", "BAD_REQUEST"},
                   {"message", "attachment of 1025 bytes exceeds control.max_attachment_bytes (1024); closing the "
                               "connection"}});
        CHECK(c.closed_by_peer());
    }
    for (const json& count : {json(-1), json(1.5), json("64")}) {
        INFO(count.dump());
        RawClient c(d.socket());
        c.send_frame(json{{"op", "buffer.write"}, {"buffer", id}, {"attachment", count}}.dump());
        const auto reply = c.read_reply();
        REQUIRE(reply.has_value());
        CHECK(reply->at("error") == json{{"code", "BAD_REQUEST"},
                                         {"message", "attachment: expected a byte count (an integer from 0), got " +
                                                         count.dump() + "; closing the connection"}});
        CHECK(c.closed_by_peer());
    }
    // Over the limit on any op closes too: the bytes cannot be skipped cheaply.
    RawClient c(d.socket());
    c.send_frame(json{{"op", "status"}, {"attachment", 4096}}.dump());
    const auto reply = c.read_reply();
    REQUIRE(reply.has_value());
    CHECK(reply->at("error").at("message") ==
          "attachment of 4096 bytes exceeds control.max_attachment_bytes (1024); closing the connection");
    CHECK(c.closed_by_peer());
    check_usable(setup);
}

TEST_CASE("an attachment that stops arriving gets BAD_REQUEST after frame_timeout_ms and its connection closes",
          "[service][attachment][limits]") {
    Daemon d(e2e_config(0, 1, {{"control", {{"frame_timeout_ms", 300}}}}));
    RawClient setup(d.socket());
    const std::string id = create(setup, 4096);
    const auto incomplete = [](std::size_t got) {
        return json{{"code", "BAD_REQUEST"},
                    {"message", "attachment incomplete: no byte of it arrived for 300 ms, after " +
                                    std::to_string(got) + " of its 100 bytes; closing the connection"}};
    };
    {
        // Read into the buffer: the step fails, its range is free again.
        RawClient c(d.socket());
        c.send_frame(write_request(id, 0, 100).dump());
        c.send_bytes(std::string(10, 'z'));
        const auto reply = c.read_reply(std::chrono::milliseconds(5000));
        REQUIRE(reply.has_value());
        CHECK(reply->at("error") == incomplete(10));
        CHECK(c.closed_by_peer());
    }
    {
        // Discarded after a refusal: the refusal, then the same close.
        RawClient c(d.socket());
        c.send_frame(write_request("nope", 0, 100).dump());
        c.send_bytes(std::string(30, 'z'));
        const auto refused = c.read_reply();
        REQUIRE(refused.has_value());
        CHECK(refused->at("error").at("code") == "UNKNOWN_BUFFER");
        const auto reply = c.read_reply(std::chrono::milliseconds(5000));
        REQUIRE(reply.has_value());
        CHECK(reply->at("error") == incomplete(30));
        CHECK(c.closed_by_peer());
    }
    // The daemon serves the others, and the range of the failed write is free.
    CHECK(write_bytes(setup, id, 0, std::string(100, 'y')).at("written") == 100);
    CHECK(read_bytes(setup, id, 0, 100).second == std::string(100, 'y'));
}

TEST_CASE("the daemon's open fds are the same before and after 1000 fd hand-overs and attachment transfers",
          "[service][attachment][fd]") {
    Daemon d(e2e_config(1, 0));
    RawClient c(d.socket());
    const std::string shm = create(c, 64 * 1024);
    const std::string vmm = create(c, 64 * 1024, {{"backend", "vmm"}, {"on", "chip0"}});
    const std::string block = pattern_bytes(4096, 5);
    const auto one_round = [&](int i) {
        const std::string& buffer = i % 2 == 0 ? shm : vmm;
        switch (i % 5) {
        case 0:
        case 1: {
            const json reply =
                c.request({{"op", "buffer.fd"}, {"buffer", buffer}, {"access", i % 2 ? "read" : "readwrite"}});
            REQUIRE(reply.at("ok") == true);
            REQUIRE(c.take_fds().size() == 1); // closed here at once
            break;
        }
        case 2:
            REQUIRE(write_bytes(c, buffer, static_cast<std::uint64_t>(i % 16) * 4096, block).at("ok") == true);
            break;
        case 3:
            REQUIRE(read_bytes(c, buffer, static_cast<std::uint64_t>(i % 16) * 4096, 4096).second.size() == 4096);
            break;
        default:
            REQUIRE(write_bytes(c, "nope", 0, block).at("error").at("code") == "UNKNOWN_BUFFER");
        }
    };
    for (int i = 0; i < 10; ++i) {
        one_round(i);
    }
    const std::size_t before = open_fds(d.pid());
    for (int i = 0; i < 1000; ++i) {
        one_round(i);
    }
    CHECK(open_fds(d.pid()) == before);
}

TEST_CASE("a client's mapping of a released buffer stays valid memory and the daemon forgets the buffer",
          "[service][attachment][fd]") {
    Daemon d(e2e_config(1, 0));
    RawClient c(d.socket());
    for (const json& extra : {json::object(), json{{"backend", "vmm"}, {"on", "chip0"}}}) {
        INFO(extra.dump());
        const std::string id = create(c, 1u << 20, extra);
        REQUIRE(c.request({{"op", "buffer.fd"}, {"buffer", id}}).at("ok") == true);
        auto fds = c.take_fds();
        REQUIRE(fds.size() == 1);
        auto region = canopy::ipc::MappedRegion::map_shared(fds[0].get(), 1u << 20, true);
        const std::string path = std::filesystem::read_symlink("/proc/self/fd/" + std::to_string(fds[0].get()));
        fds.clear(); // the mapping alone keeps the pages
        std::memset(region.data(), 0x5a, 1u << 20);
        REQUIRE(c.request({{"op", "buffer.release"}, {"buffer", id}}).at("ok") == true);
        // Every page is still there, readable and writable.
        CHECK(std::all_of(region.data(), region.data() + (1u << 20), [](std::byte b) { return b == std::byte{0x5a}; }));
        std::memset(region.data(), 0x33, 1u << 20);
        CHECK(region.data()[(1u << 20) - 1] == std::byte{0x33});
        // The daemon no longer lists the buffer, and a shm object is gone from /dev/shm.
        const json listed = c.request({{"op", "buffer.list"}});
        for (const json& b : listed.at("buffers")) {
            CHECK(b.at("id") != id);
        }
        CHECK(c.request({{"op", "buffer.show"}, {"buffer", id}}).at("error").at("code") == "STALE_BUFFER");
        if (path.rfind("/dev/shm/", 0) == 0) {
            CHECK_FALSE(std::filesystem::exists(path));
        } else {
            CHECK_THAT(path, Catch::StartsWith("/memfd:"));
        }
    }
}

TEST_CASE("a cuda_vmm buffer is written and read through attachments by way of its chip",
          "[service][attachment][gpu]") {
    if (!std::filesystem::exists("/dev/nvidia0")) {
        CANOPY_SKIP("needs a GPU");
    }
    const json config = {
        {"node", {{"name", "gpu"}, {"level", 3}, {"chips", {{{"device", 0}, {"backend", "cuda"}}}}, {"subs", 0}}}};
    Daemon d(config);
    RawClient c(d.socket());
    constexpr std::size_t SIZE = 64u << 20;
    const std::string id = create(c, SIZE, {{"backend", "vmm"}, {"on", "chip0"}});
    const std::string content = pattern_bytes(SIZE, 13);
    CHECK(write_bytes(c, id, 0, content) == json{{"ok", true}, {"written", SIZE}});
    const auto [reply, back] = read_bytes(c, id, 0);
    CHECK(reply == json{{"ok", true}, {"attachment", SIZE}, {"rest", 0}});
    CHECK(back == content);
    const auto [cut, tail] = read_bytes(c, id, SIZE - 10, 100);
    CHECK(cut.at("short") == true);
    CHECK(tail == content.substr(SIZE - 10));
}
