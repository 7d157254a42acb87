#include "daemon/host_window.h"

#include "daemon/request_error.h"
#include "ipc/sys_error.h"

#include <fcntl.h>
#include <stdexcept>
#include <sys/mman.h>
#include <unistd.h>

namespace canopy::daemon {

namespace {

// Windows up to this size are faulted in when mapped (MAP_POPULATE), in one go rather than page by page during the
// transfer. The mapping is made on the io thread or a completion thread, so a larger window is left to fault while
// its bytes move, a socket buffer at a time, between other clients' work.
constexpr std::uint64_t POPULATE_MAX_BYTES = std::uint64_t{256} << 20;

// Maps [offset, offset + length) of `fd`: mmap wants a page-aligned file offset, so the mapping starts at the page
// that holds `offset`.
HostWindow map_fd_range(int fd, std::uint64_t offset, std::uint64_t length, bool write) {
    const auto page = static_cast<std::uint64_t>(::sysconf(_SC_PAGESIZE));
    const std::uint64_t start = offset / page * page;
    const auto span = static_cast<std::size_t>(offset + length - start);
    const int prot = PROT_READ | (write ? PROT_WRITE : 0);
    const int populate = span <= POPULATE_MAX_BYTES ? MAP_POPULATE : 0;
    void* p = ::mmap(nullptr, span, prot, MAP_SHARED | populate, fd, static_cast<off_t>(start));
    if (p == MAP_FAILED) {
        throw ipc::SysError(errno, "mmap");
    }
    HostWindow window;
    window.region = ipc::MappedRegion(p, span);
    window.data = window.region.data() + (offset - start);
    window.length = length;
    return window;
}

} // namespace

HostWindow map_window(const BufferInfo& info, const BufferRegistry& registry, std::uint64_t offset,
                      std::uint64_t length, bool write) {
    const BufferDescriptor& d = info.descriptor;
    switch (Backend{d.backend}) {
    case Backend::POSIX_SHM:
        return map_shm_window(d, offset, length, write);
    case Backend::SIM_VMM: {
        auto fds = registry.dup_fds(d.identity);
        if (fds.empty()) {
            throw RequestError(ErrorCode::UNKNOWN_BUFFER, "buffer " + to_string(d.identity) + " has no backing");
        }
        return map_fd_range(fds[0].get(), offset, length, write);
    }
    case Backend::FORK_SHM:
    case Backend::FORK_COW: {
        if (write && Backend{d.backend} == Backend::FORK_COW) {
            throw RequestError(ErrorCode::ACCESS_DENIED, "preloaded arena '" + info.name + "' is read-only");
        }
        HostWindow window;
        window.data = reinterpret_cast<std::byte*>(fork_base(d)) + offset;
        window.length = length;
        return window;
    }
    case Backend::CUDA_VMM:
        break;
    }
    throw std::logic_error("cuda_vmm buffers are read and written through a staging buffer");
}

HostWindow map_shm_window(const BufferDescriptor& d, std::uint64_t offset, std::uint64_t length, bool write) {
    const std::string path = "/" + std::string(shm_name(d));
    ipc::UniqueFd fd(ipc::sys_check(::shm_open(path.c_str(), (write ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0), "shm_open"));
    return map_fd_range(fd.get(), offset, length, write);
}

std::vector<TensorArg> byte_range_views(const BufferDescriptor& buffer, std::uint64_t offset, std::uint64_t length,
                                        TensorTag tag) {
    constexpr std::uint64_t VIEW = 0xffffffffu;
    std::vector<TensorArg> views;
    for (std::uint64_t at = 0; at < length; at += VIEW) {
        const auto n = static_cast<std::uint32_t>(std::min(VIEW, length - at));
        views.push_back({make_tensor(buffer, DataType::UINT8, {n}, {}, offset + at), tag});
    }
    return views;
}

} // namespace canopy::daemon
