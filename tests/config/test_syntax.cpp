// JSON syntax errors name the line and column where the parser stopped.

#include "config_test_util.h"

using canopy::config::testing::require_rejected;

TEST_CASE("a syntax error names its line and column with the whole-document pointer", "[config]") {
    SECTION("trailing comma") {
        require_rejected("{\n  \"node\": {\n    \"subs\": 2,\n  }\n}", "", "line 4, column 3: syntax error");
    }
    SECTION("bad literal") {
        require_rejected("{\n\"node\": tru}", "", "line 2, column 12: syntax error");
    }
    SECTION("unterminated document") {
        require_rejected("{\n  \"node\": {\"subs\": 1}\n", "", "line 3, column 1: syntax error");
    }
    SECTION("empty text") {
        require_rejected("", "", "line 1, column 1: syntax error");
    }
    SECTION("comments are not JSON") {
        require_rejected("{\"node\": {\"subs\": 1}} // x", "", "line 1, column 23: syntax error");
    }
    SECTION("text after the document") {
        require_rejected("{\"node\": {\"subs\": 1}}\n{}", "", "line 2, column 1: syntax error");
    }
    SECTION("invalid UTF-8 in a string") {
        require_rejected("{\"node\": {\"name\": \"a\xff\"}}", "", "line 1, column 21: syntax error");
        // The message quotes the bad byte escaped, so the message itself is valid UTF-8.
        require_rejected("{\"node\": {\"name\": \"a\xff\"}}", "", "last read: '\"a\\xFF'");
    }
}

TEST_CASE("a syntax error message keeps the parser's description of what it found", "[config]") {
    require_rejected("{\"node\": {\"subs\": 1,}}", "", "expected string literal");
}
