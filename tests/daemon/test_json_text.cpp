// The JSON text the daemon writes without building a JSON tree: string literals and task states. Each is
// checked by parsing it back with nlohmann::json.
#include "daemon/json_codec.h"
#include "daemon/task_book.h"

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
