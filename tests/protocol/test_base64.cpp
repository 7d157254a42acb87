#include "protocol/base64.h"

#include <catch2/catch.hpp>
#include <random>

using canopy::base64_decode;
using canopy::base64_encode;
using canopy::Base64Error;

TEST_CASE("base64 encodes the RFC 4648 test vectors", "[protocol]") {
    CHECK(base64_encode("") == "");
    CHECK(base64_encode("f") == "Zg==");
    CHECK(base64_encode("fo") == "Zm8=");
    CHECK(base64_encode("foo") == "Zm9v");
    CHECK(base64_encode("foob") == "Zm9vYg==");
    CHECK(base64_encode("fooba") == "Zm9vYmE=");
    CHECK(base64_encode("foobar") == "Zm9vYmFy");
}

TEST_CASE("base64 decodes the RFC 4648 test vectors", "[protocol]") {
    CHECK(base64_decode("") == "");
    CHECK(base64_decode("Zg==") == "f");
    CHECK(base64_decode("Zm8=") == "fo");
    CHECK(base64_decode("Zm9v") == "foo");
    CHECK(base64_decode("Zm9vYg==") == "foob");
    CHECK(base64_decode("Zm9vYmE=") == "fooba");
    CHECK(base64_decode("Zm9vYmFy") == "foobar");
}

TEST_CASE("base64 round-trips every byte value and every length up to 300", "[protocol]") {
    std::string all;
    for (int i = 0; i < 256; ++i) {
        all += static_cast<char>(i);
    }
    CHECK(base64_decode(base64_encode(all)) == all);
    CHECK(base64_encode(std::string("\xfb\xff", 2)) == "+/8=");

    std::mt19937 rng(7);
    for (std::size_t n = 0; n <= 300; ++n) {
        std::string bytes(n, '\0');
        for (auto& b : bytes) {
            b = static_cast<char>(rng() & 0xff);
        }
        const std::string text = base64_encode(bytes);
        REQUIRE(text.size() == canopy::base64_encoded_size(n));
        REQUIRE(base64_decode(text) == bytes);
    }
}

TEST_CASE("base64 decode rejects a length that is not a multiple of 4", "[protocol]") {
    CHECK_THROWS_WITH(base64_decode("Zg="), "base64: length 3 is not a multiple of 4");
    CHECK_THROWS_AS(base64_decode("Zm9vY"), Base64Error);
}

TEST_CASE("base64 decode rejects characters outside the alphabet", "[protocol]") {
    CHECK_THROWS_WITH(base64_decode("Zm*v"), "base64: character 2 ('*') is not in the alphabet");
    CHECK_THROWS_WITH(base64_decode("Zm9v\nZg="), Catch::Contains("character 4 (byte 0x0a)"));
    CHECK_THROWS_WITH(base64_decode("Zm-_"), Catch::Contains("('-') is not in the alphabet"));
    CHECK_THROWS_WITH(base64_decode("Zm 9"), Catch::Contains("(' ')"));
}

TEST_CASE("base64 decode rejects padding anywhere but at the end", "[protocol]") {
    CHECK_THROWS_WITH(base64_decode("Zg==Zg=="), Catch::Contains("'=' may only end the text"));
    CHECK_THROWS_WITH(base64_decode("Z=9v"), Catch::Contains("character 1 ('=')"));
    CHECK_THROWS_WITH(base64_decode("Z==="), Catch::Contains("character 1 ('=')"));
    CHECK_THROWS_WITH(base64_decode("===="), Catch::Contains("character 0 ('=')"));
}

TEST_CASE("base64 decode rejects non-zero bits before the padding", "[protocol]") {
    CHECK_THROWS_WITH(base64_decode("Zh=="), "base64: character 1 leaves non-zero bits before the padding");
    CHECK_THROWS_WITH(base64_decode("Zm9="), "base64: character 2 leaves non-zero bits before the padding");
}
