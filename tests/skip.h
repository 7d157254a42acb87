#pragma once
// CANOPY_SKIP(reason): ends a test case that cannot run on this machine (no GPU, a build without the CUDA
// Toolkit, a missing tool) so that ctest reports it as skipped, never as passed. It prints the line
// "CANOPY-SKIP: <reason>" on stdout, which the SKIP_REGULAR_EXPRESSION that tests/CMakeLists.txt sets on every
// discovered test matches, WARNs "skipped: <reason>" for Catch's own reporters, and returns from the test case.
// `reason` is streamed as in INFO: CANOPY_SKIP("needs " << n << " GPU(s)").
//
// ctest reports a test whose output holds the marker as skipped whatever its exit status, so a skip must not
// follow a failure: CANOPY_SKIP in a test case that has already failed an assertion FAILs instead of printing the
// marker. Nothing of the test case runs after it. A skipped test case has no assertions of its own; the
// `-w NoAssertions` that ctest passes makes Catch count that as a failure, which the marker overrides.
//
// Thread safety: call it on the thread that runs the test case.

#include <sstream>
#include <string>
#include <string_view>

namespace canopy::testing {

// What ctest's SKIP_REGULAR_EXPRESSION matches (tests/CMakeLists.txt sets the same text).
inline constexpr std::string_view SKIP_MARKER = "CANOPY-SKIP:";

// Prints the marker line and WARNs; FAILs instead when the running test case has already failed an assertion
// (a Catch listener in tests/skip.cpp counts them).
void report_skip(const std::string& reason);

} // namespace canopy::testing

#define CANOPY_SKIP(reason)                                                                                            \
    do {                                                                                                               \
        std::ostringstream canopy_skip_reason_;                                                                        \
        canopy_skip_reason_ << reason;                                                                                 \
        ::canopy::testing::report_skip(canopy_skip_reason_.str());                                                     \
        return;                                                                                                        \
    } while (0)
