// libFuzzer target: parse_identity on arbitrary text. A string either throws WireError or parses to an
// identity that passes validate_identity and prints back to exactly the same string; anything else
// aborts.

#include "protocol/identity.h"

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view text(reinterpret_cast<const char*>(data), size);
    canopy::CanonicalIdentity id;
    try {
        id = canopy::parse_identity(text);
    } catch (const canopy::WireError&) {
        return 0;
    }
    validate_identity(id); // throws, and so crashes the fuzzer, if the parser let a bad identity through
    if (canopy::to_string(id) != text) {
        std::fprintf(stderr, "fuzz_parse_identity: '%.*s' does not print back to itself\n", static_cast<int>(size),
                     text.data());
        std::abort();
    }
    return 0;
}
