// The numbers of a task request (daemon/json_numbers.h through parse_task): every value a field cannot hold
// exactly is refused naming the field and the value, never wrapped, rounded to infinity or cast.
#include "daemon/json_codec.h"
#include "parse_task_support.h"

#include <catch2/catch.hpp>
#include <cfloat>

using namespace canopy;
using canopy::daemon::parse_task;
using namespace canopy::testing;
using nlohmann::json;

namespace {

// A fill task over a 1024-float view with these tensor fields merged in, then `scalars` as arguments.
json task_with(const json& tensor_fields, const std::vector<json>& scalars = {json{{"float32", 1.5}}}) {
    json tensor = {{"buffer", "b"}, {"dtype", "float32"}, {"shape", {1024}}};
    tensor.update(tensor_fields);
    json args = json::array({{{"tensor", tensor}, {"tag", "output"}}});
    for (const json& s : scalars) {
        args.push_back({{"scalar", s}});
    }
    return {{"kernel", "fill"}, {"on", "chip0"}, {"args", args}};
}

json task_with_scalar(const json& scalar) {
    return task_with(json::object(), {scalar});
}

json task_with_launch(const json& launch) {
    json t = task_with(json::object());
    t["launch"] = launch;
    return t;
}

ScalarArg scalar_of(const json& scalar) {
    return parse_task(task_with_scalar(scalar), one_buffer, "task").request.args.scalars.at(0);
}

} // namespace

TEST_CASE("an int64 scalar outside int64 is refused naming the field and the value", "[daemon][json]") {
    CHECK(bad_request_message(task_with_scalar({{"int64", 18446744073709551615ULL}})) ==
          "task.args[1].scalar.int64: 18446744073709551615 is out of range for int64");
    CHECK(bad_request_message(task_with_scalar({{"int64", 9223372036854775808ULL}})) ==
          "task.args[1].scalar.int64: 9223372036854775808 is out of range for int64");
    CHECK(bad_request_message(task_with_scalar(json::parse(R"({"int64": -9223372036854775809})"))) ==
          "task.args[1].scalar.int64: -9.223372036854776e+18 is out of range for int64");
    CHECK(bad_request_message(task_with_scalar(json::parse(R"({"int64": 1e19})"))) ==
          "task.args[1].scalar.int64: 1e+19 is out of range for int64");
}

TEST_CASE("an int64 scalar takes every int64 and refuses a fraction, an exponent or a string", "[daemon][json]") {
    CHECK(scalar_of({{"int64", INT64_MAX}}).as_i64() == INT64_MAX);
    CHECK(scalar_of({{"int64", INT64_MIN}}).as_i64() == INT64_MIN);
    CHECK(scalar_of(json::parse(R"({"int64": -0})")).as_i64() == 0);
    CHECK(bad_request_message(task_with_scalar({{"int64", 1.5}})) ==
          "task.args[1].scalar.int64: expected an integer, got 1.5");
    CHECK(bad_request_message(task_with_scalar(json::parse(R"({"int64": 2e0})"))) ==
          "task.args[1].scalar.int64: expected an integer, got 2.0");
    CHECK(bad_request_message(task_with_scalar({{"int64", "5"}})) ==
          "task.args[1].scalar.int64: expected an integer, got \"5\"");
}

TEST_CASE("a float32 scalar that rounds past FLT_MAX is refused instead of becoming infinity", "[daemon][json]") {
    CHECK(bad_request_message(task_with_scalar({{"float32", 1e39}})) ==
          "task.args[1].scalar.float32: 1e+39 is out of range for float32");
    CHECK(bad_request_message(task_with_scalar({{"float32", -3.5e38}})) ==
          "task.args[1].scalar.float32: -3.5e+38 is out of range for float32");
    // FLT_MAX + half an ulp is the first magnitude that rounds to infinity.
    CHECK(bad_request_message(task_with_scalar({{"float32", 0x1.ffffffp127}})) ==
          "task.args[1].scalar.float32: 3.4028235677973366e+38 is out of range for float32");
    CHECK(bad_request_message(task_with_scalar({{"float32", true}})) ==
          "task.args[1].scalar.float32: expected a number, got true");
}

TEST_CASE("a float32 scalar takes every finite float, FLT_MAX also in its shortest spelling", "[daemon][json]") {
    CHECK(scalar_of({{"float32", static_cast<double>(FLT_MAX)}}).as_f32() == FLT_MAX);
    CHECK(scalar_of(json::parse(R"({"float32": 3.4028235e38})")).as_f32() == FLT_MAX);
    CHECK(scalar_of(json::parse(R"({"float32": -3.4028235e38})")).as_f32() == -FLT_MAX);
    CHECK(scalar_of({{"float32", 18446744073709551615ULL}}).as_f32() == 0x1p64f);
    CHECK(scalar_of({{"float32", 1.5}}).as_f32() == 1.5f);
}

TEST_CASE("a float64 scalar takes any JSON number and refuses anything else by name", "[daemon][json]") {
    CHECK(scalar_of({{"float64", 1e308}}).as_f64() == 1e308);
    CHECK(scalar_of({{"float64", -7}}).as_f64() == -7.0);
    CHECK(bad_request_message(task_with_scalar({{"float64", nullptr}})) ==
          "task.args[1].scalar.float64: expected a number, got null");
}

TEST_CASE("a shape or stride outside 0..4294967295 is refused naming the dimension and the value", "[daemon][json]") {
    CHECK(bad_request_message(task_with({{"shape", {4294967296ULL}}})) ==
          "task.args[0].tensor.shape[0]: 4294967296 is out of range 0..4294967295");
    CHECK(bad_request_message(task_with({{"shape", {4, -1}}})) ==
          "task.args[0].tensor.shape[1]: -1 is out of range 0..4294967295");
    CHECK(bad_request_message(task_with({{"shape", {18446744073709551615ULL}}})) ==
          "task.args[0].tensor.shape[0]: 18446744073709551615 is out of range 0..4294967295");
    CHECK(bad_request_message(task_with({{"shape", {2.0}}})) ==
          "task.args[0].tensor.shape[0]: expected an integer, got 2.0");
    CHECK(bad_request_message(task_with({{"shape", {1e10}}})) ==
          "task.args[0].tensor.shape[0]: 10000000000.0 is out of range 0..4294967295");
    CHECK(bad_request_message(task_with({{"strides", {-2}}})) ==
          "task.args[0].tensor.strides[0]: -2 is out of range 0..4294967295");
}

TEST_CASE("a byte_offset that is negative, fractional or beyond 64 bits is refused by name", "[daemon][json]") {
    CHECK(bad_request_message(task_with({{"byte_offset", -4}})) ==
          "task.args[0].tensor.byte_offset: -4 is out of range 0..18446744073709551615");
    CHECK(bad_request_message(task_with({{"byte_offset", 4.0}})) ==
          "task.args[0].tensor.byte_offset: expected an integer, got 4.0");
    CHECK(bad_request_message(task_with(json::parse(R"({"byte_offset": 18446744073709551616})"))) ==
          "task.args[0].tensor.byte_offset: 1.8446744073709552e+19 is out of range 0..18446744073709551615");
}

TEST_CASE("a launch dimension or shared_bytes outside its 32-bit range is refused by name", "[daemon][json]") {
    CHECK(bad_request_message(task_with_launch({{"grid", {0}}})) ==
          "task.launch.grid[0]: 0 is out of range 1..4294967295");
    CHECK(bad_request_message(task_with_launch({{"grid", {1, 4294967296ULL}}})) ==
          "task.launch.grid[1]: 4294967296 is out of range 1..4294967295");
    CHECK(bad_request_message(task_with_launch({{"block", {18446744073709551615ULL}}})) ==
          "task.launch.block[0]: 18446744073709551615 is out of range 1..4294967295");
    CHECK(bad_request_message(task_with_launch({{"block", {1.5}}})) ==
          "task.launch.block[0]: expected an integer, got 1.5");
    CHECK(bad_request_message(task_with_launch({{"shared_bytes", -1}})) ==
          "task.launch.shared_bytes: -1 is out of range 0..4294967295");
    CHECK(bad_request_message(task_with_launch({{"shared_bytes", 4294967296ULL}})) ==
          "task.launch.shared_bytes: 4294967296 is out of range 0..4294967295");
    CHECK(bad_request_message(task_with_launch({{"shared_bytes", "0"}})) ==
          "task.launch.shared_bytes: expected an integer, got \"0\"");
}

TEST_CASE("a shape whose row-major strides overflow 32 bits is refused by its own message", "[daemon][json]") {
    const auto [code, message] = task_refusal(task_with({{"shape", {2, 65536, 65537}}}));
    CHECK(code == ErrorCode::INVALID_TENSOR);
    CHECK(message == "task.args[0].tensor.shape: row-major strides of shape [2, 65536, 65537] overflow 32 bits; "
                     "give strides explicitly");
    // The largest stride that fits is no overflow: the view is refused for its extent instead.
    const auto [fits_code, fits_message] = task_refusal(task_with({{"shape", {2, 4294967295ULL}}}));
    CHECK(fits_code == ErrorCode::INVALID_TENSOR);
    CHECK_THAT(fits_message, !Catch::Contains("overflow 32 bits"));
}
