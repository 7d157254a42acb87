// parse_bounded_json: the depth limit and the duplicate-key refusal shared by the config parser and the
// control socket, checked on the refusal's parts, and on a thread with a small stack to show that nothing
// recurses in proportion to the depth of the text.

#include "config/bounded_json.h"
#include "config_test_util.h"

#include <catch2/catch.hpp>
#include <pthread.h>
#include <string>

using canopy::config::BoundedJson;
using canopy::config::JsonRefusalKind;
using canopy::config::MAX_JSON_DEPTH;
using canopy::config::parse_bounded_json;
using canopy::config::testing::nested_arrays;
using nlohmann::json;

namespace {

// The refusal of `text`; fails the test when the text was accepted.
canopy::config::JsonRefusal refusal_of(std::string_view text, std::size_t max_depth = MAX_JSON_DEPTH) {
    BoundedJson parsed = parse_bounded_json(text, max_depth);
    REQUIRE(parsed.refusal.has_value());
    CHECK(parsed.value.is_null());
    return *parsed.refusal;
}

// Runs parse_bounded_json(text) on a thread whose whole stack is `stack_bytes`.
BoundedJson parse_on_small_stack(const std::string& text, std::size_t stack_bytes) {
    struct Job {
        const std::string* text;
        BoundedJson result;
    } job{&text, {}};
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, stack_bytes);
    pthread_t thread;
    const auto run = [](void* arg) -> void* {
        auto* j = static_cast<Job*>(arg);
        j->result = parse_bounded_json(*j->text);
        return nullptr;
    };
    REQUIRE(pthread_create(&thread, &attr, run, &job) == 0);
    pthread_join(thread, nullptr);
    pthread_attr_destroy(&attr);
    return std::move(job.result);
}

} // namespace

TEST_CASE("parse_bounded_json builds the same tree as nlohmann's parse", "[config][json]") {
    const std::string text =
        R"({"a": [1, -2, 18446744073709551615, 1.5, "s", true, null, {}, []], "b": {"c": {"d": 0}}})";
    const BoundedJson parsed = parse_bounded_json(text);
    REQUIRE_FALSE(parsed.refusal.has_value());
    CHECK(parsed.value == json::parse(text));
    CHECK(parsed.value["a"][2].is_number_unsigned());
    CHECK(parsed.value["a"][1].is_number_integer());
    CHECK(parsed.value["a"][3].is_number_float());
}

TEST_CASE("parse_bounded_json accepts 64 levels and refuses the 65th", "[config][json]") {
    const BoundedJson at_limit = parse_bounded_json(nested_arrays(MAX_JSON_DEPTH));
    REQUIRE_FALSE(at_limit.refusal.has_value());
    CHECK(at_limit.value.is_array());
    const auto refusal = refusal_of(nested_arrays(MAX_JSON_DEPTH + 1));
    CHECK(refusal.kind == JsonRefusalKind::TOO_DEEP);
    CHECK(refusal.max_depth == 64);
    std::string pointer;
    for (std::size_t i = 1; i <= MAX_JSON_DEPTH; ++i) {
        pointer += "/0";
    }
    CHECK(refusal.pointer == pointer);
}

TEST_CASE("parse_bounded_json counts scalars inside the deepest container as no level", "[config][json]") {
    const std::string text = std::string(MAX_JSON_DEPTH, '[') + "1, \"s\", null" + std::string(MAX_JSON_DEPTH, ']');
    CHECK_FALSE(parse_bounded_json(text).refusal.has_value());
}

TEST_CASE("parse_bounded_json names the too-deep container by its pointer through objects and arrays",
          "[config][json]") {
    const auto refusal = refusal_of(R"({"a": [0, {"b/c": {"~d": [[]]}}]})", 5);
    CHECK(refusal.kind == JsonRefusalKind::TOO_DEEP);
    CHECK(refusal.pointer == "/a/1/b~1c/~0d/0");
    CHECK(refusal_of("[[]]", 1).pointer == "/0");
    CHECK(refusal_of("{}", 0).pointer == "");
}

TEST_CASE("parse_bounded_json refuses a million levels on a 256 KiB stack", "[config][json]") {
    const BoundedJson parsed = parse_on_small_stack(nested_arrays(1'000'000), 256 * 1024);
    REQUIRE(parsed.refusal.has_value());
    CHECK(parsed.refusal->kind == JsonRefusalKind::TOO_DEEP);
    const std::string objects = [] {
        std::string text;
        for (int i = 0; i < 200'000; ++i) {
            text += "{\"k\":";
        }
        return text + "1" + std::string(200'000, '}');
    }();
    const BoundedJson deep_objects = parse_on_small_stack(objects, 256 * 1024);
    REQUIRE(deep_objects.refusal.has_value());
    CHECK(deep_objects.refusal->kind == JsonRefusalKind::TOO_DEEP);
}

TEST_CASE("parse_bounded_json refuses a repeated key with the key and the pointer of its object", "[config][json]") {
    auto refusal = refusal_of(R"({"op": "status", "op": "shutdown"})");
    CHECK(refusal.kind == JsonRefusalKind::DUPLICATE_KEY);
    CHECK(refusal.key == "op");
    CHECK(refusal.pointer == "");
    refusal = refusal_of(R"({"task": {"args": [1, {"scalar": 1, "scalar": 2}]}})");
    CHECK(refusal.kind == JsonRefusalKind::DUPLICATE_KEY);
    CHECK(refusal.key == "scalar");
    CHECK(refusal.pointer == "/task/args/1");
    refusal = refusal_of(R"({"a/b": {"x~": 1, "x~": 2}})");
    CHECK(refusal.key == "x~");
    CHECK(refusal.pointer == "/a~1b");
}

TEST_CASE("parse_bounded_json keeps the same key in different objects", "[config][json]") {
    const BoundedJson parsed = parse_bounded_json(R"({"a": {"k": 1}, "b": {"k": 2}, "k": [{"k": 3}, {"k": 4}]})");
    REQUIRE_FALSE(parsed.refusal.has_value());
    CHECK(parsed.value["k"][1]["k"] == 4);
}

TEST_CASE("parse_bounded_json reports a syntax error with nlohmann's byte count and message", "[config][json]") {
    auto refusal = refusal_of("{\"a\": tru}");
    CHECK(refusal.kind == JsonRefusalKind::SYNTAX);
    CHECK(refusal.read == 10);
    CHECK_THAT(refusal.message, Catch::Contains("syntax error"));
    CHECK(refusal_of("{} {}").kind == JsonRefusalKind::SYNTAX);
    CHECK(refusal_of("").kind == JsonRefusalKind::SYNTAX);
    CHECK_THAT(refusal_of("[1e400]").message, Catch::Contains("number overflow"));
}
