#include "cli/cli_error.h"
#include "cli/units.h"

#include <catch2/catch.hpp>

using namespace canopy::cli;

namespace {

// The message of the usage_error that parse_byte_size throws for `text`.
std::string size_error(const std::string& text) {
    try {
        parse_byte_size(text, "--bytes");
    } catch (const CliError& e) {
        CHECK(e.exit_code() == ExitCode::USAGE);
        return e.what();
    }
    FAIL("no error for \"" << text << "\"");
    return "";
}

} // namespace

TEST_CASE("byte sizes take plain integers and binary suffixes", "[cli]") {
    CHECK(parse_byte_size("0", "--bytes") == 0);
    CHECK(parse_byte_size("4096", "--bytes") == 4096);
    CHECK(parse_byte_size("64K", "--bytes") == 64u << 10);
    CHECK(parse_byte_size("64k", "--bytes") == 64u << 10);
    CHECK(parse_byte_size("4KiB", "--bytes") == 4u << 10);
    CHECK(parse_byte_size("4kb", "--bytes") == 4u << 10);
    CHECK(parse_byte_size("1M", "--bytes") == 1u << 20);
    CHECK(parse_byte_size("3MiB", "--bytes") == 3u << 20);
    CHECK(parse_byte_size("2G", "--bytes") == 2ull << 30);
    CHECK(parse_byte_size("1T", "--bytes") == 1ull << 40);
    CHECK(parse_byte_size("18446744073709551615", "--bytes") == UINT64_MAX);
    CHECK(parse_byte_size("16777215T", "--bytes") == 16777215ull << 40);
}

TEST_CASE("byte sizes reject anything else, naming the option and the text", "[cli]") {
    CHECK(size_error("4Q") == "--bytes \"4Q\": unknown size suffix \"Q\" (use K, M, G or T)");
    CHECK(size_error("").find("--bytes \"\": expected a byte count") == 0);
    CHECK(size_error("M").find("expected a byte count") != std::string::npos);
    CHECK(size_error("-1").find("expected a byte count") != std::string::npos);
    CHECK(size_error("+1").find("expected a byte count") != std::string::npos);
    CHECK(size_error(" 4").find("expected a byte count") != std::string::npos);
    CHECK(size_error("1.5M") == "--bytes \"1.5M\": unknown size suffix \".5M\" (use K, M, G or T)");
    CHECK(size_error("4 K").find("unknown size suffix") != std::string::npos);
    CHECK(size_error("4KK").find("unknown size suffix") != std::string::npos);
    CHECK(size_error("18446744073709551616") == "--bytes \"18446744073709551616\": too large");
    CHECK(size_error("16777216T") == "--bytes \"16777216T\": too large");
}

TEST_CASE("byte counts render in binary units", "[cli]") {
    CHECK(format_bytes(0) == "0 B");
    CHECK(format_bytes(1023) == "1023 B");
    CHECK(format_bytes(1024) == "1.0 KiB");
    CHECK(format_bytes(1536) == "1.5 KiB");
    CHECK(format_bytes(4u << 20) == "4.0 MiB");
    CHECK(format_bytes((1u << 20) - 1) == "1.0 MiB");
    CHECK(format_bytes(3ull << 30) == "3.0 GiB");
    CHECK(format_bytes(UINT64_MAX) == "16.0 EiB");
}

TEST_CASE("uptimes render as s, m and s, h and m, d and h", "[cli]") {
    CHECK(format_uptime(0) == "0s");
    CHECK(format_uptime(12.9) == "12s");
    CHECK(format_uptime(184) == "3m04s");
    CHECK(format_uptime(7500) == "2h05m");
    CHECK(format_uptime(3 * 86400 + 4 * 3600 + 59) == "3d04h");
    CHECK(format_uptime(-1) == "-");
}

TEST_CASE("task times render from nanoseconds", "[cli]") {
    CHECK(format_elapsed_ns(850) == "850ns");
    CHECK(format_elapsed_ns(12'345) == "12us");
    CHECK(format_elapsed_ns(3'400'000) == "3.4ms");
    CHECK(format_elapsed_ns(250'000'000) == "250ms");
    CHECK(format_elapsed_ns(1'204'000'000) == "1.20s");
    CHECK(format_elapsed_ns(184'000'000'000) == "3m04s");
}
