// The JSON text the daemon writes without building a JSON tree: string literals and task states. Each is
// checked by parsing it back with nlohmann::json.
#include "daemon/json_codec.h"
#include "daemon/task_book.h"
#include "remote/canopy_remote.pb.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>

using namespace canopy;
using namespace canopy::daemon;
using nlohmann::json;

namespace {

json parsed_string(std::string_view text) {
    std::string out;
    append_json_string(out, text);
    return json::parse(out);
}

} // namespace

TEST_CASE("append_json_string writes a literal that parses back to the text", "[json]") {
    for (const std::string& text : {std::string(), std::string("plain"), std::string("quote \" and \\ backslash"),
                                    std::string("tab\tnew\nline\r\x01\x1f"), std::string("nul\0inside", 10),
                                    std::string("caf\xc3\xa9 \xe2\x9c\x93")}) {
        const json back = parsed_string(text);
        REQUIRE(back.is_string());
        CHECK(back.get<std::string>() == text);
    }
}

TEST_CASE("append_json_string replaces bytes that are not UTF-8 as nlohmann's dump does", "[json]") {
    const std::string bad = "name\xff\xfe tail";
    std::string out;
    append_json_string(out, bad);
    CHECK(out == json(bad).dump(-1, ' ', false, json::error_handler_t::replace));
    CHECK(json::parse(out).get<std::string>() == "name\xef\xbf\xbd\xef\xbf\xbd tail");
}

TEST_CASE("valid_utf8 keeps UTF-8 and replaces what is not, cutting at a character within a byte limit", "[json]") {
    const std::string e_acute = "\xc3\xa9";         // U+00E9
    const std::string replacement = "\xef\xbf\xbd"; // U+FFFD
    CHECK(valid_utf8("plain ascii") == "plain ascii");
    CHECK(valid_utf8("caf" + e_acute) == "caf" + e_acute);
    CHECK(valid_utf8(std::string("a\xff"
                                 "b",
                                 3)) == "a" + replacement + "b");
    // A message cut inside a character, as a result's message is at its byte limit.
    CHECK(valid_utf8("x" + e_acute.substr(0, 1)) == "x" + replacement);
    // Nothing protobuf's parse of a string field refuses is left.
    remote::v1::TaskReply reply;
    reply.set_message(valid_utf8(std::string("\xc0\x80 \xed\xa0\x80 \xf8", 8)));
    remote::v1::TaskReply back;
    CHECK(back.ParseFromString(reply.SerializeAsString()));
    // Within a limit: ASCII is cut at the byte, and a character that does not fit whole is left out.
    CHECK(valid_utf8("abcdef", 4) == "abcd");
    CHECK(valid_utf8("ab" + e_acute + "c", 3) == "ab");
    CHECK(valid_utf8("ab" + e_acute + "c", 4) == "ab" + e_acute);
    CHECK(valid_utf8(std::string("ab\xff", 3), 4) == "ab");
    CHECK(valid_utf8(std::string("ab\xff", 3), 5) == "ab" + replacement);
}

TEST_CASE("append_task_json lists a task's state, with an error only when it failed", "[json]") {
    TaskRecord t;
    t.id = 42;
    t.name = "step \"one\"";
    t.kernel = "sleep_ms";
    t.on = "chip0";
    t.state = "completed";
    t.submitted_ns = 1;
    t.start_ns = 2;
    t.end_ns = 18446744073709551615ULL;
    const json ok = task_json(t);
    CHECK(ok == json{{"name", "step \"one\""},
                     {"id", 42},
                     {"kernel", "sleep_ms"},
                     {"on", "chip0"},
                     {"state", "completed"},
                     {"submitted_ns", 1},
                     {"start_ns", 2},
                     {"end_ns", 18446744073709551615ULL}});

    t.state = "failed";
    t.code = ErrorCode::DEPENDENCY_FAILED;
    t.message = "task 'a' failed:\n\"why\"";
    const json failed = task_json(t);
    CHECK(failed.at("error") == json{{"code", "DEPENDENCY_FAILED"}, {"message", "task 'a' failed:\n\"why\""}});
}

TEST_CASE("a tasks listing is the unfinished tasks and the newest history by id, daemon steps left out", "[json]") {
    TaskBook book(2);
    const auto record = [](std::uint64_t id, const std::string& name, bool listed = true) {
        TaskRecord t;
        t.id = id;
        t.name = name;
        t.kernel = "sleep_ms";
        t.on = "sub0";
        t.listed = listed;
        return t;
    };
    CHECK(book.list_members() == "\"tasks\":[]");
    for (std::uint64_t id = 1; id <= 6; ++id) {
        book.add(record(id, "t" + std::to_string(id) + " \"quoted\"", id != 4));
    }
    // Finished in another order than their ids; 4 is a daemon step, which takes no history.
    for (const std::uint64_t id : std::initializer_list<std::uint64_t>{5, 1, 4, 2}) {
        book.finish(id, "completed", ErrorCode::OK, "", 10 * id, 10 * id + 1);
    }
    book.finish(3, "failed", ErrorCode::KERNEL_FAILED, "no \"luck\"", 30, 31);
    // A history of 2: 5, 1 and 2 finished before 3, and the newest two, 2 and 3, remain. 6 has not finished.
    const json listed = json::parse("{" + book.list_members() + "}");
    REQUIRE(listed.at("tasks").size() == 3);
    std::vector<std::uint64_t> ids;
    for (const auto& t : listed.at("tasks")) {
        ids.push_back(t.at("id").get<std::uint64_t>());
    }
    CHECK(ids == std::vector<std::uint64_t>{2, 3, 6});
    CHECK(listed.at("tasks")[0] == task_json(*book.find(2)));
    CHECK(listed.at("tasks")[1].at("error") == json{{"code", "KERNEL_FAILED"}, {"message", "no \"luck\""}});
    CHECK(listed.at("tasks")[2].at("state") == "queued");
    CHECK(listed.at("tasks")[2].at("name") == "t6 \"quoted\"");
}
