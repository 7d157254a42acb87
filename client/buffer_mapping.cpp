#include "client/buffer_mapping.h"

#include <cerrno>
#include <stdexcept>
#include <sys/mman.h>
#include <system_error>
#include <utility>

namespace canopy::client {

BufferMapping::BufferMapping(BufferInfo buffer, bool writable, const std::vector<int>& fds)
    : buffer_(std::move(buffer)), writable_(writable) {
    const auto length = static_cast<std::size_t>(buffer_.nbytes);
    for (const int fd : fds) {
        void* p = ::mmap(nullptr, length, PROT_READ | (writable ? PROT_WRITE : 0), MAP_SHARED, fd, 0);
        if (p == MAP_FAILED) {
            const int err = errno;
            unmap();
            throw std::system_error(err, std::generic_category(), "mmap of buffer " + buffer_.id);
        }
        regions_.push_back({p, length});
    }
}

BufferMapping::BufferMapping(BufferMapping&& other) noexcept
    : buffer_(std::move(other.buffer_)), writable_(other.writable_), regions_(std::exchange(other.regions_, {})) {}

BufferMapping& BufferMapping::operator=(BufferMapping&& other) noexcept {
    if (this != &other) {
        unmap();
        buffer_ = std::move(other.buffer_);
        writable_ = other.writable_;
        regions_ = std::exchange(other.regions_, {});
    }
    return *this;
}

BufferMapping::~BufferMapping() {
    unmap();
}

void BufferMapping::unmap() noexcept {
    for (const Region& r : regions_) {
        ::munmap(r.base, r.length);
    }
    regions_.clear();
}

std::span<const std::byte> BufferMapping::cbytes(std::size_t rank) const {
    if (rank >= regions_.size()) {
        throw std::out_of_range("buffer " + buffer_.id + " has " + std::to_string(regions_.size()) +
                                " mapped rank(s), not " + std::to_string(rank + 1));
    }
    return {static_cast<const std::byte*>(regions_[rank].base), regions_[rank].length};
}

std::span<std::byte> BufferMapping::bytes(std::size_t rank) const {
    if (!writable_) {
        throw std::logic_error("buffer " + buffer_.id + " is mapped read-only; use cbytes()");
    }
    const auto b = cbytes(rank);
    return {const_cast<std::byte*>(b.data()), b.size()};
}

} // namespace canopy::client
