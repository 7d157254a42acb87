#include "daemon/arenas.h"

#include "ipc/sys_error.h"
#include "ipc/unique_fd.h"

#include <cerrno>
#include <cstring>
#include <fcntl.h>
#include <stdexcept>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace canopy::daemon {
namespace {

[[noreturn]] void fail(const config::PreloadConfig& p, const std::string& why) {
    throw std::runtime_error("preload '" + p.name + "': " + why);
}

ipc::UniqueFd open_file(const config::PreloadConfig& p, std::size_t& size) {
    ipc::UniqueFd fd(::open(p.path->c_str(), O_RDONLY | O_CLOEXEC));
    if (!fd) {
        fail(p, "cannot open " + p.path->string() + ": " + std::strerror(errno));
    }
    struct stat st {};
    ipc::sys_check(::fstat(fd.get(), &st), "fstat");
    size = static_cast<std::size_t>(st.st_size);
    return fd;
}

ipc::MappedRegion map_cow(const config::PreloadConfig& p) {
    std::size_t size = 0;
    const ipc::UniqueFd fd = open_file(p, size);
    if (size == 0) {
        fail(p, p.path->string() + " is empty");
    }
    void* base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE | MAP_POPULATE, fd.get(), 0);
    if (base == MAP_FAILED) {
        fail(p, std::string("mmap: ") + std::strerror(errno));
    }
    return ipc::MappedRegion(base, size);
}

ipc::MappedRegion map_shared(const config::PreloadConfig& p) {
    const auto size = static_cast<std::size_t>(p.bytes);
    void* base = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED) {
        fail(p, std::string("mmap of ") + std::to_string(size) + " bytes: " + std::strerror(errno));
    }
    ipc::MappedRegion region(base, size);
    if (p.path) {
        std::size_t file_size = 0;
        const ipc::UniqueFd fd = open_file(p, file_size);
        const std::size_t want = std::min(file_size, size);
        std::size_t done = 0;
        while (done < want) {
            const ssize_t n = ::read(fd.get(), region.data() + done, want - done);
            if (n < 0 && errno == EINTR) {
                continue;
            }
            if (n <= 0) {
                fail(p, "reading " + p.path->string() + ": " + (n == 0 ? "unexpected end" : std::strerror(errno)));
            }
            done += static_cast<std::size_t>(n);
        }
    }
    return region;
}

} // namespace

MappedArenas map_arenas(const std::vector<config::PreloadConfig>& preload) {
    MappedArenas out;
    for (const auto& p : preload) {
        const bool cow = p.backend == config::PreloadBackend::FORK_COW;
        ipc::MappedRegion region = cow ? map_cow(p) : map_shared(p);
        out.views.push_back({p.name, cow ? Backend::FORK_COW : Backend::FORK_SHM,
                             reinterpret_cast<std::uintptr_t>(region.data()), region.size()});
        out.regions.push_back(std::move(region));
    }
    return out;
}

} // namespace canopy::daemon
