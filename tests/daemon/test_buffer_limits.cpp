// The registry's limits on creating a buffer: the size limit, the space of /dev/shm reserved up front, and
// a creation that finds no file descriptor left. Each failure names its cause and leaves nothing behind.

#include "daemon/buffer_registry.h"
#include "fixture.h"
#include "tests/skip.h"

#include <catch2/catch.hpp>
#include <fcntl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

using namespace canopy;
using namespace canopy::testing;
using daemon::BufferCreateError;
using daemon::BufferRegistry;

namespace {

// Leaves this process exactly `spare` free file descriptors until destroyed: lowers the soft limit a little
// above the highest descriptor open, and fills every free number below it with /dev/null.
class SpareFds {
public:
    explicit SpareFds(int spare) {
        ::getrlimit(RLIMIT_NOFILE, &saved_);
        int highest = 0;
        for (const auto& entry : std::filesystem::directory_iterator("/proc/self/fd")) {
            highest = std::max(highest, std::stoi(entry.path().filename().string()));
        }
        rlimit low = saved_;
        low.rlim_cur = static_cast<rlim_t>(highest + 1 + 16);
        ::setrlimit(RLIMIT_NOFILE, &low);
        for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) {
            fillers_.push_back(fd);
        }
        for (int i = 0; i < spare && !fillers_.empty(); ++i) {
            ::close(fillers_.back());
            fillers_.pop_back();
        }
    }
    ~SpareFds() {
        for (const int fd : fillers_) {
            ::close(fd);
        }
        ::setrlimit(RLIMIT_NOFILE, &saved_);
    }
    SpareFds(const SpareFds&) = delete;
    SpareFds& operator=(const SpareFds&) = delete;

private:
    rlimit saved_{};
    std::vector<int> fillers_;
};

std::string creation_failure(BufferRegistry& registry, std::uint64_t nbytes) {
    try {
        (void)registry.create_posix_shm(nbytes, Access::READWRITE, "/");
    } catch (const BufferCreateError& e) {
        return e.what();
    }
    return "created";
}

} // namespace

TEST_CASE("buffers over 2^48 bytes are refused by name before anything is made", "[daemon][buffers][limits]") {
    TempDir state;
    BufferRegistry registry(state.path / "journal");
    CHECK(daemon::MAX_BUFFER_BYTES == std::uint64_t{1} << 48);
    CHECK(creation_failure(registry, std::uint64_t{1} << 62) ==
          "buffer create: 4611686018427387904 bytes is over the limit of 281474976710656 bytes (2^48) per buffer");
    CHECK(creation_failure(registry, daemon::MAX_BUFFER_BYTES + 1) ==
          "buffer create: 281474976710657 bytes is over the limit of 281474976710656 bytes (2^48) per buffer");
    CHECK_THROWS_WITH(registry.begin_vmm(Backend::SIM_VMM, std::uint64_t{1} << 62, Access::READWRITE, 0, {}, "/chip0"),
                      "buffer create: 4611686018427387904 bytes is over the limit of 281474976710656 bytes (2^48) "
                      "per buffer");
    CHECK_THROWS_AS(registry.begin_vmm(Backend::CUDA_VMM, daemon::MAX_BUFFER_BYTES + 1, Access::READWRITE, 0,
                                       {"/chip0", "/chip1"}, "/"),
                    BufferCreateError);
    CHECK(registry.journal().entries().empty());
    // No identity was spent on them.
    const auto d = registry.create_posix_shm(4096, Access::READWRITE, "/");
    CHECK(d.identity.buffer_id == 1);
    CHECK(d.identity.generation == 1);
}

TEST_CASE("a shm buffer's pages are reserved when it is created", "[daemon][buffers][limits]") {
    TempDir state;
    BufferRegistry registry(state.path / "journal");
    constexpr std::uint64_t NBYTES = 4 * 1024 * 1024;
    const auto d = registry.create_posix_shm(NBYTES, Access::READWRITE, "/");
    struct stat st {};
    REQUIRE(::stat(("/dev/shm/" + std::string(shm_name(d))).c_str(), &st) == 0);
    CHECK(static_cast<std::uint64_t>(st.st_size) == NBYTES);
    CHECK(static_cast<std::uint64_t>(st.st_blocks) * 512 >= NBYTES); // allocated, not a sparse file
}

TEST_CASE("a shm buffer creation that finds no file descriptor left fails by name and leaves nothing behind",
          "[daemon][buffers][limits]") {
#ifdef CANOPY_SANITIZED // the sanitizer build: ASan and UBSan together
    CANOPY_SKIP("UBSan's vptr check needs a free file descriptor, which this test takes away");
#endif
    TempDir state;
    BufferRegistry registry(state.path / "journal");
    {
        SpareFds none(0);
        CHECK(creation_failure(registry, 4096) ==
              "buffer create: no file descriptor left in canopyd (open(journal entry): Too many open files)");
    }
    CHECK(registry.journal().entries().empty());
    {
        // One descriptor: the journal entry is made, syncing its directory needs a second one.
        SpareFds one(1);
        CHECK(creation_failure(registry, 4096) ==
              "buffer create: no file descriptor left in canopyd (open(journal): Too many open files)");
    }
    CHECK(registry.journal().entries().empty());
    CHECK(registry.list().empty());
    // With descriptors again, the next buffer takes the first slot: none was spent.
    const auto d = registry.create_posix_shm(4096, Access::READWRITE, "/");
    CHECK(d.identity.buffer_id == 1);
    CHECK(d.identity.generation == 1);
    CHECK(registry.journal().entries().size() == 1);
}
