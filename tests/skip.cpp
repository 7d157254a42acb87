// The listener behind CANOPY_SKIP's rule that a failed test case cannot be reported as skipped: it counts the
// failed assertions of the running test case. Catch reports every failure to its listeners (passing
// assertions only with -s), which is all the count needs.

// TestEventListenerBase is one of the interfaces Catch declares only for reporters and listeners.
#define CATCH_CONFIG_EXTERNAL_INTERFACES
#include "tests/skip.h"

#include <catch2/catch.hpp>
#include <cstdint>
#include <iostream>

namespace canopy::testing {
namespace {

std::uint64_t failures = 0; // of the running test case; Catch runs test cases on one thread

class FailureCounter : public Catch::TestEventListenerBase {
public:
    using TestEventListenerBase::TestEventListenerBase;

    void testCaseStarting(const Catch::TestCaseInfo& info) override {
        TestEventListenerBase::testCaseStarting(info);
        failures = 0;
    }

    bool assertionEnded(const Catch::AssertionStats& stats) override {
        if (!stats.assertionResult.isOk()) {
            ++failures;
        }
        return true;
    }
};

CATCH_REGISTER_LISTENER(FailureCounter)

} // namespace

void report_skip(const std::string& reason) {
    if (failures != 0) {
        FAIL("cannot skip (" << reason << "): the test case has already failed " << failures << " assertion(s)");
    }
    std::cout << SKIP_MARKER << ' ' << reason << std::endl;
    WARN("skipped: " << reason);
}

} // namespace canopy::testing
