#pragma once
// Helpers shared by the config tests: the example configs, checking a rejection or a round trip, building small
// documents, temporary directories.

#include "config/config.h"
#include "config/config_error.h"
#include "config/to_json.h"

#include <catch2/catch.hpp>
#include <cstdlib>
#include <filesystem>
#include <string>

namespace canopy::config::testing {

// config/examples in the source tree.
inline const std::filesystem::path EXAMPLES = CANOPY_EXAMPLES_DIR;

// `depth` arrays nested in one another: "[[...]]".
inline std::string nested_arrays(std::size_t depth) {
    return std::string(depth, '[') + std::string(depth, ']');
}

// Requires `config` written as JSON to parse back to itself.
inline void check_round_trip(const Config& config) {
    const std::string text = to_json(config).dump(2);
    INFO(text);
    CHECK(parse_config(text) == config);
}

// A document whose node is valid (one sim chip) with `sections` (", "-joined "key": value pairs) added.
inline std::string with_sections(const std::string& sections) {
    return R"({"node": {"chips": [{"device": 0, "backend": "sim"}]}, )" + sections + "}";
}

// A document with `node` as its node object.
inline std::string with_node(const std::string& node) {
    return R"({"node": )" + node + "}";
}

// Requires parse_config to refuse `text` with ConfigError at exactly `pointer`, with `fragment` in the
// message, and with what() == "POINTER: PROBLEM".
inline void require_rejected(const std::string& text, const std::string& pointer, const std::string& fragment) {
    INFO("document: " << text);
    try {
        (void)parse_config(text);
        FAIL("parse_config accepted the document");
    } catch (const ConfigError& error) {
        INFO("what(): " << error.what());
        CHECK(error.pointer() == pointer);
        CHECK_THAT(error.what(), Catch::Contains(fragment));
        CHECK(std::string(error.what()) == (pointer.empty() ? error.problem() : pointer + ": " + error.problem()));
    }
}

struct RejectCase {
    std::string rule;
    std::string document;
    std::string pointer;
    std::string fragment;
};

// One SECTION per case, named by its rule.
inline void require_all_rejected(const std::vector<RejectCase>& cases) {
    for (const RejectCase& c : cases) {
        SECTION(c.rule) {
            require_rejected(c.document, c.pointer, c.fragment);
        }
    }
}

// A fresh directory under $TMPDIR (or /tmp), removed with everything in it on destruction.
class TempDir {
public:
    TempDir() {
        const char* base = std::getenv("TMPDIR");
        std::string pattern = std::string(base != nullptr ? base : "/tmp") + "/canopy-config-XXXXXX";
        if (::mkdtemp(pattern.data()) == nullptr) {
            throw std::runtime_error("mkdtemp failed");
        }
        path_ = pattern;
    }
    TempDir(const TempDir&) = delete;
    TempDir& operator=(const TempDir&) = delete;
    ~TempDir() {
        std::error_code ignored;
        std::filesystem::remove_all(path_, ignored);
    }
    const std::filesystem::path& path() const { return path_; }

private:
    std::filesystem::path path_;
};

} // namespace canopy::config::testing
