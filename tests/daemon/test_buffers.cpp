#include "fixture.h"
#include "ipc/child_message.h"

#include <catch2/catch.hpp>
#include <sys/mman.h>
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

TEST_CASE("a buffer whose release has begun is refused to new tasks but still reached by queued ones", "[daemon]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 1, 1));
    sup.start();
    const auto buf = sup.create_buffer({256, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    const auto other = sup.create_buffer({256, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    sup.begin_release(buf.identity);
    auto& registry = sup.registry();
    CHECK(registry.lookup(buf.identity) == daemon::BufferLookup::STALE);
    CHECK(registry.releasing(buf.identity));
    REQUIRE(registry.find(buf.identity).has_value()); // what a queued task's worker asks for
    CHECK(registry.find(buf.identity)->descriptor == buf);
    const auto listed = sup.buffers();
    REQUIRE(listed.size() == 1);
    CHECK(listed[0].descriptor == other);
    // A new task is refused as if the buffer were gone already.
    const auto r = sup.run(task("iota", "chip0", {arg(buf, TensorTag::OUTPUT, DataType::FLOAT32, {64})}));
    CHECK(r.code == ErrorCode::STALE_BUFFER);
    CHECK_THAT(r.message, Catch::Contains("was released"));
    // A task the service accepted before the release began still runs over it (its dispatch).
    auto accepted = task("fill", "chip0", {arg(buf, TensorTag::OUTPUT, DataType::UINT8, {256})});
    accepted.args.scalars.push_back(ScalarArg::i64(9));
    accepted.signature_checked = true;
    CHECK(sup.run(accepted).ok());
    // A second release is refused at once; the first ends it.
    try {
        sup.begin_release(buf.identity);
        FAIL("began the release of a buffer twice");
    } catch (const daemon::RequestError& e) {
        CHECK(e.code() == ErrorCode::STALE_BUFFER);
        CHECK_THAT(std::string(e.what()), Catch::Contains("was already released"));
    }
    CHECK_FALSE(sup.release_buffer(buf.identity).has_value());
    CHECK_FALSE(registry.releasing(buf.identity));
    CHECK_FALSE(registry.find(buf.identity).has_value());
    CHECK(registry.lookup(buf.identity) == daemon::BufferLookup::STALE);
    try {
        (void)sup.release_buffer(buf.identity);
        FAIL("released a buffer twice");
    } catch (const daemon::RequestError& e) {
        CHECK(e.code() == ErrorCode::STALE_BUFFER);
    }
    // The slot's next buffer starts live, not releasing.
    const auto next = sup.create_buffer({256, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    REQUIRE(next.identity.buffer_id == buf.identity.buffer_id);
    CHECK_FALSE(registry.releasing(next.identity));
    CHECK(sup.run(task("iota", "chip0", {arg(next, TensorTag::OUTPUT, DataType::FLOAT32, {64})})).ok());
}

TEST_CASE("the release of a preloaded arena or of an unknown buffer is refused before it begins", "[daemon]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 1, 1));
    sup.start();
    const auto buf = sup.create_buffer({256, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    const auto arena = sup.registry().register_arena("weights", Backend::FORK_SHM, 0x10000, 4096);
    try {
        sup.begin_release(arena.identity);
        FAIL("began the release of a preloaded arena");
    } catch (const daemon::RequestError& e) {
        CHECK(e.code() == ErrorCode::BAD_REQUEST);
        CHECK_THAT(std::string(e.what()), Catch::Contains("preloaded arena 'weights'"));
    }
    CHECK_FALSE(sup.registry().releasing(arena.identity));
    CanonicalIdentity unknown = buf.identity;
    unknown.generation += 5;
    try {
        sup.begin_release(unknown);
        FAIL("began the release of an unknown buffer");
    } catch (const daemon::RequestError& e) {
        CHECK(e.code() == ErrorCode::UNKNOWN_BUFFER);
    }
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

namespace {

ipc::UniqueFd some_fd() {
    return ipc::UniqueFd(ipc::sys_check(::memfd_create("canopy-test", MFD_CLOEXEC), "memfd_create"));
}

} // namespace

TEST_CASE("a device buffer's fds are taken only from the chips asked, once per rank, while pending",
          "[daemon][buffers]") {
    TempDir state;
    daemon::BufferRegistry registry(state.path / "journal");
    const auto d = registry.begin_vmm(Backend::SIM_VMM, 4096, Access::READWRITE, 0, {}, "/chip0");
    // Pending: not live, not stale; no consumer gets fds.
    CHECK(registry.lookup(d.identity) == daemon::BufferLookup::UNKNOWN);
    CHECK(registry.dup_fds(d.identity).empty());
    CHECK_FALSE(registry.offer_fd(d, "/chip1", ipc::NOT_SYMMETRIC, some_fd())); // another chip
    CHECK_FALSE(registry.offer_fd(d, "/chip", ipc::NOT_SYMMETRIC, some_fd()));  // a prefix that is no parent
    CHECK_FALSE(registry.offer_fd(d, "/chip0", 0, some_fd()));                  // a rank for a plain buffer
    CHECK_FALSE(registry.offer_fd(d, "/chip0", ipc::NOT_SYMMETRIC, ipc::UniqueFd()));
    auto forged = d;
    forged.nbytes = 8192; // the descriptor must be the one minted
    CHECK_FALSE(registry.offer_fd(forged, "/chip0", ipc::NOT_SYMMETRIC, some_fd()));
    CHECK_FALSE(registry.wait_fds(d.identity, std::chrono::milliseconds(1)));
    CHECK(registry.offer_fd(d, "/chip0", ipc::NOT_SYMMETRIC, some_fd()));
    CHECK_FALSE(registry.offer_fd(d, "/chip0", ipc::NOT_SYMMETRIC, some_fd())); // once
    CHECK(registry.wait_fds(d.identity, std::chrono::milliseconds(1)));
    registry.commit_vmm(d.identity);
    CHECK(registry.lookup(d.identity) == daemon::BufferLookup::LIVE);
    CHECK(registry.dup_fds(d.identity).size() == 1);
    CHECK_FALSE(registry.offer_fd(d, "/chip0", ipc::NOT_SYMMETRIC, some_fd())); // no longer pending

    // A symmetric buffer: one fd per rank, from that rank's chip, or from the node above it.
    const auto s = registry.begin_vmm(Backend::SIM_VMM, 4096, Access::READWRITE, 0, {"/chip0", "/node0/chip1"}, "/");
    CHECK_FALSE(registry.offer_fd(s, "/chip0", ipc::NOT_SYMMETRIC, some_fd()));
    CHECK_FALSE(registry.offer_fd(s, "/chip0", 1, some_fd()));
    CHECK_FALSE(registry.offer_fd(s, "/chip0", 2, some_fd()));
    CHECK(registry.offer_fd(s, "/chip0", 0, some_fd()));
    CHECK_FALSE(registry.wait_fds(s.identity, std::chrono::milliseconds(1)));
    CHECK(registry.offer_fd(s, "/node0", 1, some_fd()));
    CHECK(registry.wait_fds(s.identity, std::chrono::milliseconds(1)));

    // An aborted creation retires its identity: later sights are stale, the slot's next buffer is new.
    const auto a = registry.begin_vmm(Backend::SIM_VMM, 4096, Access::READWRITE, 0, {}, "/chip0");
    registry.abort_vmm(a.identity);
    CHECK(registry.lookup(a.identity) == daemon::BufferLookup::STALE);
    CHECK_FALSE(registry.offer_fd(a, "/chip0", ipc::NOT_SYMMETRIC, some_fd()));
    const auto b = registry.begin_vmm(Backend::SIM_VMM, 4096, Access::READWRITE, 0, {}, "/chip0");
    CHECK(b.identity.buffer_id == a.identity.buffer_id);
    CHECK(b.identity.generation == a.identity.generation + 1);
}

TEST_CASE("device buffers are made by the chip named, of its kind, and never by a sub", "[daemon][buffers]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 2, 1));
    sup.start();
    const auto d = sup.create_buffer({4096, Backend::SIM_VMM, Access::READWRITE, "chip1", {}});
    CHECK(sup.registry().find(d.identity)->creator == "/chip1");
    CHECK(sup.registry().dup_fds(d.identity).size() == 1);
    auto refused = [&](daemon::BufferRequest request, ErrorCode code, const std::string& text) {
        try {
            (void)sup.create_buffer(request);
            FAIL("created " << to_string(request.backend) << " on '" << request.on << "'");
        } catch (const daemon::RequestError& e) {
            CHECK(e.code() == code);
            CHECK_THAT(std::string(e.what()), Catch::Contains(text));
        }
    };
    refused({4096, Backend::CUDA_VMM, Access::READWRITE, "chip0", {}}, ErrorCode::NO_CONSUMER, "cuda_vmm");
    refused({4096, Backend::SIM_VMM, Access::READWRITE, "sub0", {}}, ErrorCode::NO_CONSUMER, "sim_vmm");
    refused({4096, Backend::CUDA_VMM, Access::READWRITE, "", {"chip0", "chip1"}}, ErrorCode::NO_CONSUMER, "cuda_vmm");
    refused({4096, Backend::SIM_VMM, Access::READWRITE, "chip7", {}}, ErrorCode::UNKNOWN_WORKER, "chip7");
    // Nothing half-made stays behind.
    CHECK(sup.buffers().size() == 1);
    // Control frames are the supervisor's own: a submitted @vmm_create is no kernel.
    const auto r = sup.run(task("@vmm_create", "chip0", {arg(d, TensorTag::OUTPUT, DataType::UINT8, {1})}));
    CHECK(r.code == ErrorCode::UNKNOWN_KERNEL);
    CHECK(sup.buffers().size() == 1);
}

namespace {

int refuse_unlink(const std::string& /*name*/) noexcept {
    return EBUSY;
}

} // namespace

TEST_CASE("a release whose shm_unlink fails is reported, stays in the journal, and the next start unlinks it",
          "[daemon][buffers]") {
    TempDir state;
    const auto journal_dir = state.path / "journal";
    std::string name;
    {
        daemon::BufferRegistry registry(journal_dir, refuse_unlink);
        const auto d = registry.create_posix_shm(4096, Access::READWRITE, "/");
        name = std::string(shm_name(d));
        const auto failure = registry.release(d.identity);
        REQUIRE(failure.has_value());
        CHECK_THAT(*failure, Catch::Contains("shm_unlink(/" + name + ")"));
        CHECK_THAT(*failure, Catch::Contains("kept in the journal for the next start"));
        // The buffer is gone for tasks, the object and its journal entry are not.
        CHECK(registry.lookup(d.identity) == daemon::BufferLookup::STALE);
        const auto entries = registry.journal().entries();
        CHECK(std::find(entries.begin(), entries.end(), name) != entries.end());
        CHECK(std::filesystem::exists("/dev/shm/" + name));
    }
    // The next start over the same state directory unlinks what the journal still lists.
    daemon::Journal journal(journal_dir);
    const auto report = journal.recover();
    CHECK(std::find(report.unlinked.begin(), report.unlinked.end(), name) != report.unlinked.end());
    CHECK_FALSE(std::filesystem::exists("/dev/shm/" + name));
    CHECK(journal.entries().empty());
}
