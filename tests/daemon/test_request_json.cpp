// parse_request: a control frame's body to a request, with the depth limit and the duplicate-key refusal
// worded as the BAD_REQUEST reply gives them.
#include "daemon/request_json.h"

#include <catch2/catch.hpp>
#include <string>

using canopy::daemon::parse_request;
using nlohmann::json;

namespace {

constexpr std::size_t DEEP = 100'000;

// `depth` arrays nested in one another.
std::string nested_arrays(std::size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
}

// The pointer of the container at level 65 when `prefix` names the member at `level` and arrays follow.
std::string deep_pointer(const std::string& prefix, std::size_t level) {
    std::string pointer = prefix;
    for (std::size_t l = level; l < 65; ++l) {
        pointer += "/0";
    }
    return pointer;
}

std::string error_of(const std::string& body) {
    const auto parsed = parse_request(body);
    CHECK(parsed.request.is_null());
    return parsed.error;
}

} // namespace

TEST_CASE("parse_request returns the object of a well-formed body with no error", "[daemon][json]") {
    const auto parsed = parse_request(R"({"op": "status", "id": [1, {"a": null}]})");
    CHECK(parsed.error.empty());
    CHECK(parsed.request == json{{"op", "status"}, {"id", json::array({1, {{"a", nullptr}}})}});
}

TEST_CASE("parse_request refuses a body nested 100000 levels deep by the pointer where it passes 64 levels",
          "[daemon][json]") {
    const std::string message = "request: JSON nests deeper than 64 levels at ";
    CHECK(error_of(R"({"op": "status", "id": )" + nested_arrays(DEEP) + "}") == message + deep_pointer("/id", 2));
    CHECK(error_of(R"({"op": "submit", "task": {"kernel": "fill", "on": "chip0", "launch": {"grid": )" +
                   nested_arrays(DEEP) + "}}}") == message + deep_pointer("/task/launch/grid", 4));
    CHECK(error_of(R"({"op": "submit", "task": {"kernel": "m:f", "params": )" + nested_arrays(DEEP) + "}}") ==
          message + deep_pointer("/task/params", 3));
    CHECK(error_of(nested_arrays(DEEP)) == message + deep_pointer("", 1));
}

TEST_CASE("parse_request accepts a request whose deepest container is at level 64", "[daemon][json]") {
    // The top-level object is level 1 and "id" level 2, so 63 arrays reach level 64.
    const auto parsed = parse_request(R"({"op": "status", "id": )" + nested_arrays(63) + "}");
    CHECK(parsed.error.empty());
    CHECK(parsed.request.is_object());
}

TEST_CASE("parse_request refuses a repeated key instead of letting the last one win", "[daemon][json]") {
    CHECK(error_of(R"({"op": "status", "op": "shutdown"})") ==
          R"(request: duplicate key "op" in the top-level object)");
    CHECK(error_of(R"({"op": "submit", "task": {"launch": {"grid": [1], "grid": [2]}}})") ==
          R"(request: duplicate key "grid" in object at /task/launch)");
    CHECK(error_of(R"({"op": "run", "tasks": [{}, {"name": "a", "name": "b"}]})") ==
          R"(request: duplicate key "name" in object at /tasks/1)");
}

TEST_CASE("parse_request refuses a body that is not a JSON object", "[daemon][json]") {
    for (const std::string body : {"[1, 2]", "\"op\"", "{\"op\": ", "not json", "{} {}", "[1e400]"}) {
        INFO(body);
        CHECK(error_of(body) == "the frame body is not a JSON object");
    }
}
