// The Catch2 main of every test executable. A test spec that matches no test case fails the run (exit 2) instead
// of passing with nothing run: the NoTests warning is on before the command line is read, and the command line's
// -w (ctest passes -w NoAssertions) adds to it, since Catch takes only one -w.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

int main(int argc, char* argv[]) {
    Catch::Session session;
    session.configData().warnings = Catch::WarnAbout::NoTests;
    if (const int rc = session.applyCommandLine(argc, argv); rc != 0) {
        return rc;
    }
    return session.run();
}
