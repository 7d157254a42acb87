// Requests past the parser's bounds (docs/control-protocol.md "Framing"): JSON nested deeper than 64 levels
// and keys given twice get BAD_REQUEST naming the problem, and the daemon keeps serving.

#include "fixture.h"

#include <catch2/catch.hpp>

using namespace canopy::e2e;
using nlohmann::json;
using namespace std::chrono_literals;

namespace {

constexpr std::size_t DEEP = 100'000;

std::string nested_arrays(std::size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
}

// Sends `body` and requires a BAD_REQUEST reply, without an id, whose message starts with `message`.
void require_refused(RawClient& c, const std::string& body, const std::string& message) {
    c.send_frame(body);
    const auto reply = c.read_reply();
    REQUIRE(reply.has_value());
    INFO(reply->dump().substr(0, 400));
    CHECK(reply->at("ok") == false);
    CHECK(reply->at("error").at("code") == "BAD_REQUEST");
    CHECK_THAT(reply->at("error").at("message").get<std::string>(), Catch::StartsWith(message));
    CHECK_FALSE(reply->contains("id"));
}

} // namespace

TEST_CASE("a request nested 100000 levels deep or with a repeated op is refused and the daemon keeps serving",
          "[service][limits]") {
    Daemon d(e2e_config(1, 1));
    const std::string too_deep = "request: JSON nests deeper than 64 levels at ";
    {
        RawClient c(d.socket());
        require_refused(c, R"({"op": "status", "id": )" + nested_arrays(DEEP) + "}", too_deep + "/id/0/0/0/");
        require_refused(c,
                        R"({"op": "submit", "task": {"kernel": "fill", "on": "chip0", "launch": {"grid": )" +
                            nested_arrays(DEEP) + "}}}",
                        too_deep + "/task/launch/grid/0/0/");
        require_refused(
            c, R"({"op": "submit", "task": {"kernel": "m:f", "on": "chip0", "params": )" + nested_arrays(DEEP) + "}}",
            too_deep + "/task/params/0/0/");
        require_refused(c, R"({"op": "status", "op": "shutdown"})",
                        R"(request: duplicate key "op" in the top-level object)");
        const json status = c.request({{"op", "status"}, {"id", "same connection"}});
        CHECK(status.at("ok") == true);
        CHECK(status.at("id") == "same connection");
    }
    CHECK_FALSE(d.wait_exit(500ms).has_value());
    RawClient fresh(d.socket());
    const json status = fresh.request({{"op", "status"}, {"id", 2}});
    CHECK(status.at("ok") == true);
    CHECK(status.at("workers").size() == 2);
}
