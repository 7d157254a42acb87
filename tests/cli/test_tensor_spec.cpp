#include "cli/cli_error.h"
#include "cli/tensor_spec.h"

#include <catch2/catch.hpp>

using namespace canopy::cli;
using nlohmann::json;

namespace {

std::string spec_error(const std::string& spec) {
    try {
        parse_tensor_spec(spec, "--in");
    } catch (const CliError& e) {
        CHECK(e.exit_code() == ExitCode::USAGE);
        return e.what();
    }
    FAIL("no error for \"" << spec << "\"");
    return "";
}

std::string scalar_error(const std::string& text) {
    try {
        parse_scalar(text, "--scalar");
    } catch (const CliError& e) {
        CHECK(e.exit_code() == ExitCode::USAGE);
        return e.what();
    }
    FAIL("no error for \"" << text << "\"");
    return "";
}

} // namespace

TEST_CASE("a SPEC with a dotted buffer ID, a dtype and a shape becomes a tensor", "[cli]") {
    CHECK(parse_tensor_spec("0011..ff.3.1:float32:1024", "--in") ==
          json{{"buffer", "0011..ff.3.1"}, {"dtype", "float32"}, {"shape", {1024}}});
}

TEST_CASE("a SPEC may give strides and a byte offset", "[cli]") {
    CHECK(
        parse_tensor_spec("ID:float32:64x64:128x1:256", "--out") ==
        json{{"buffer", "ID"}, {"dtype", "float32"}, {"shape", {64, 64}}, {"strides", {128, 1}}, {"byte_offset", 256}});
    CHECK(parse_tensor_spec("ID:int8:2x3x4:12x4x1", "--in") ==
          json{{"buffer", "ID"}, {"dtype", "int8"}, {"shape", {2, 3, 4}}, {"strides", {12, 4, 1}}});
}

TEST_CASE("a SPEC with empty STRIDES is row-major at an offset, which takes size suffixes", "[cli]") {
    CHECK(parse_tensor_spec("weights:bfloat16:8::1K", "--in") ==
          json{{"buffer", "weights"}, {"dtype", "bfloat16"}, {"shape", {8}}, {"byte_offset", 1024}});
}

TEST_CASE("a SPEC accepts every dtype name", "[cli]") {
    for (const char* dtype :
         {"float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64"}) {
        CHECK(parse_tensor_spec(std::string("b:") + dtype + ":4", "--in")["dtype"] == dtype);
    }
}

TEST_CASE("a SPEC with too few or too many fields is a usage error naming it", "[cli]") {
    CHECK(spec_error("ID") == "--in \"ID\": expected BUFFER_ID:DTYPE:SHAPE[:STRIDES[:OFFSET]], got 1 field");
    CHECK(spec_error("ID:float32") ==
          "--in \"ID:float32\": expected BUFFER_ID:DTYPE:SHAPE[:STRIDES[:OFFSET]], got 2 fields");
    CHECK(spec_error("ID:float32:4:1:0:9").find("got 6 fields") != std::string::npos);
}

TEST_CASE("a SPEC with an empty buffer ID is a usage error", "[cli]") {
    CHECK(spec_error(":float32:4") == "--in \":float32:4\": BUFFER_ID is empty");
}

TEST_CASE("a SPEC with an unknown dtype is a usage error", "[cli]") {
    CHECK(spec_error("ID:float33:4").find("--in \"ID:float33:4\": unknown DTYPE \"float33\"") == 0);
    CHECK(spec_error("ID::4").find("unknown DTYPE \"\"") != std::string::npos);
}

TEST_CASE("a SPEC with a malformed shape is a usage error", "[cli]") {
    const std::string expected = "expected integers from 1 to 4294967295 joined by 'x'";
    for (const char* spec :
         {"ID:float32:", "ID:float32:4x", "ID:float32:x4", "ID:float32:0", "ID:float32:4x0", "ID:float32:4xa",
          "ID:float32:-4", "ID:float32:4294967296", "ID:float32:4X4", "ID:float32:4,4"}) {
        const std::string message = spec_error(spec);
        CHECK(message.find("--in \"" + std::string(spec) + "\": SHAPE") == 0);
        CHECK(message.find(expected) != std::string::npos);
    }
    CHECK(spec_error("ID:float32:1x1x1x1x1x1x1x1x1") ==
          "--in \"ID:float32:1x1x1x1x1x1x1x1x1\": SHAPE has 9 extents, at most 8");
}

TEST_CASE("a SPEC with malformed strides is a usage error", "[cli]") {
    CHECK(spec_error("ID:float32:4:0").find("STRIDES \"0\": expected integers") != std::string::npos);
    CHECK(spec_error("ID:float32:4:1x").find("STRIDES \"1x\"") != std::string::npos);
    CHECK(spec_error("ID:float32:4x4:1") == "--in \"ID:float32:4x4:1\": STRIDES has 1 values, SHAPE has 2");
}

TEST_CASE("a SPEC with a malformed offset is a usage error", "[cli]") {
    CHECK(spec_error("ID:float32:4:1:abc").find("--in \"ID:float32:4:1:abc\": OFFSET \"abc\": expected a byte count") ==
          0);
    CHECK(spec_error("ID:float32:4:1:").find("OFFSET \"\"") != std::string::npos);
    CHECK(spec_error("ID:float32:4:1:-8").find("OFFSET \"-8\"") != std::string::npos);
}

TEST_CASE("scalars take float32, float64 and int64 values", "[cli]") {
    CHECK(parse_scalar("float32:1.5", "--scalar") == json{{"float32", 1.5}});
    CHECK(parse_scalar("float64:-2.25e3", "--scalar") == json{{"float64", -2250.0}});
    CHECK(parse_scalar("int64:-7", "--scalar") == json{{"int64", -7}});
    CHECK(parse_scalar("int64:9223372036854775807", "--scalar") == json{{"int64", INT64_MAX}});
    CHECK(parse_scalar("float32:3", "--scalar") == json{{"float32", 3.0}});
    CHECK(parse_scalar("int64:5", "--scalar")["int64"].is_number_integer());
}

TEST_CASE("malformed scalars are usage errors naming the argument", "[cli]") {
    CHECK(scalar_error("1.5") == "--scalar \"1.5\": expected TYPE:VALUE with TYPE float32, float64 or int64");
    CHECK(scalar_error("float16:1") ==
          "--scalar \"float16:1\": unknown scalar TYPE \"float16\" (float32, float64 or int64)");
    CHECK(scalar_error("int64:1.5") == "--scalar \"int64:1.5\": expected an integer in the int64 range");
    CHECK(scalar_error("int64:9223372036854775808").find("int64 range") != std::string::npos);
    CHECK(scalar_error("int64:").find("int64 range") != std::string::npos);
    CHECK(scalar_error("float32:abc") == "--scalar \"float32:abc\": expected a finite decimal number");
    CHECK(scalar_error("float32:").find("finite decimal number") != std::string::npos);
    CHECK(scalar_error("float32:1.5x").find("finite decimal number") != std::string::npos);
    CHECK(scalar_error("float64:nan").find("finite decimal number") != std::string::npos);
    CHECK(scalar_error("float64:inf").find("finite decimal number") != std::string::npos);
    CHECK(scalar_error("float32:1e39") == "--scalar \"float32:1e39\": out of the float32 range");
}
