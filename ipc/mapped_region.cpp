#include "ipc/mapped_region.h"

#include "ipc/sys_error.h"

#include <sys/mman.h>

namespace canopy::ipc {

MappedRegion& MappedRegion::operator=(MappedRegion&& other) noexcept {
    if (this != &other) {
        reset();
        base_ = std::exchange(other.base_, nullptr);
        length_ = std::exchange(other.length_, 0);
    }
    return *this;
}

MappedRegion MappedRegion::map_shared(int fd, std::size_t length, bool writable, bool populate) {
    const int prot = PROT_READ | (writable ? PROT_WRITE : 0);
    void* p = ::mmap(nullptr, length, prot, MAP_SHARED | (populate ? MAP_POPULATE : 0), fd, 0);
    if (p == MAP_FAILED) {
        throw SysError(errno, "mmap");
    }
    return MappedRegion(p, length);
}

void MappedRegion::reset() noexcept {
    if (base_ != nullptr) {
        ::munmap(base_, length_);
    }
    base_ = nullptr;
    length_ = 0;
}

} // namespace canopy::ipc
