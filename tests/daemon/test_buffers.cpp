#include "fixture.h"

#include <catch2/catch.hpp>
#include <sys/wait.h>

using namespace canopy;
using namespace canopy::testing;
using daemon::Supervisor;

TEST_CASE("a task naming a released buffer's old generation fails with STALE_BUFFER", "[daemon]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 1, 1));
    sup.start();
    const auto old_buf = sup.create_buffer({256, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    REQUIRE(sup.run(task("iota", "chip0", {arg(old_buf, TensorTag::OUTPUT, DataType::FLOAT32, {64})})).ok());
    REQUIRE_FALSE(sup.release_buffer(old_buf.identity).has_value());
    auto r = sup.run(task("iota", "chip0", {arg(old_buf, TensorTag::OUTPUT, DataType::FLOAT32, {64})}));
    CHECK(r.code == ErrorCode::STALE_BUFFER);
    const auto new_buf = sup.create_buffer({256, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    REQUIRE(new_buf.identity.buffer_id == old_buf.identity.buffer_id); // the slot is reused
    REQUIRE(new_buf.identity.generation == old_buf.identity.generation + 1);
    r = sup.run(task("iota", "chip0", {arg(old_buf, TensorTag::OUTPUT, DataType::FLOAT32, {64})}));
    CHECK(r.code == ErrorCode::STALE_BUFFER);
    CHECK(sup.run(task("iota", "chip0", {arg(new_buf, TensorTag::OUTPUT, DataType::FLOAT32, {64})})).ok());
}

TEST_CASE("create_buffer refuses a backend no live child can consume", "[daemon]") {
    TempDir state;
    Supervisor subs_only(l3_options(state.path, 0, 1));
    subs_only.start();
    try {
        subs_only.create_buffer({4096, Backend::SIM_VMM, Access::READWRITE, "", {}});
        FAIL("created a device buffer without a chip");
    } catch (const daemon::RequestError& e) {
        CHECK(e.code() == ErrorCode::NO_CONSUMER);
        CHECK_THAT(std::string(e.what()), Catch::Contains("sim_vmm"));
    }
}

TEST_CASE("after the supervisor stops no shm object of its buffers remains", "[daemon]") {
    TempDir state;
    std::string prefix;
    {
        Supervisor sup(l3_options(state.path, 1, 1));
        sup.start();
        for (int i = 0; i < 3; ++i) {
            const auto d = sup.create_buffer({4096, Backend::POSIX_SHM, Access::READWRITE, "", {}});
            prefix = std::string(shm_name(d)).substr(0, 12);
        }
        REQUIRE(our_shm_objects(prefix).size() == 3);
        sup.stop();
        CHECK(our_shm_objects(prefix).empty());
    }
}

TEST_CASE("a start after a SIGKILLed supervisor unlinks the shm objects its journal lists", "[daemon]") {
    TempDir state;
    int pipe_fds[2];
    REQUIRE(::pipe(pipe_fds) == 0);
    const pid_t pid = ::fork();
    REQUIRE(pid >= 0);
    if (pid == 0) {
        // The doomed supervisor: creates buffers, reports their name prefix, then waits to be killed.
        ::close(pipe_fds[0]);
        Supervisor sup(l3_options(state.path, 1, 0));
        sup.start();
        std::string prefix;
        for (int i = 0; i < 2; ++i) {
            prefix = std::string(shm_name(sup.create_buffer({4096, Backend::POSIX_SHM, Access::READWRITE, "", {}})));
        }
        prefix = prefix.substr(0, 12);
        (void)!::write(pipe_fds[1], prefix.data(), prefix.size());
        ::pause();
        ::_exit(0);
    }
    ::close(pipe_fds[1]);
    char buf[16] = {};
    REQUIRE(::read(pipe_fds[0], buf, 12) == 12);
    ::close(pipe_fds[0]);
    const std::string prefix(buf, 12);
    REQUIRE(our_shm_objects(prefix).size() == 2);
    REQUIRE(pid > 0);
    ::kill(pid, SIGKILL);
    ::waitpid(pid, nullptr, 0);
    REQUIRE(our_shm_objects(prefix).size() == 2); // leaked by the crash
    {
        Supervisor next(l3_options(state.path, 1, 0));
        CHECK(our_shm_objects(prefix).empty());
    }
}
