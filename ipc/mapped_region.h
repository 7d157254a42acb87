#pragma once
// MappedRegion: sole owner of an mmap'ed range; unmaps it on destruction. Move-only.
//
// Thread safety: one owner at a time; the memory itself may be shared with other processes.

#include <cstddef>
#include <utility>

namespace canopy::ipc {

class MappedRegion {
public:
    MappedRegion() = default;
    MappedRegion(void* base, std::size_t length) noexcept : base_(base), length_(length) {}
    MappedRegion(MappedRegion&& other) noexcept
        : base_(std::exchange(other.base_, nullptr)), length_(std::exchange(other.length_, 0)) {}
    MappedRegion& operator=(MappedRegion&& other) noexcept;
    MappedRegion(const MappedRegion&) = delete;
    MappedRegion& operator=(const MappedRegion&) = delete;
    ~MappedRegion() { reset(); }

    // Maps `length` bytes of `fd` at offset 0, shared. Throws SysError.
    // `populate`: fault every page in now (MAP_POPULATE), for a mapping about to be read or written whole.
    static MappedRegion map_shared(int fd, std::size_t length, bool writable, bool populate = false);

    std::byte* data() const noexcept { return static_cast<std::byte*>(base_); }
    std::size_t size() const noexcept { return length_; }
    explicit operator bool() const noexcept { return base_ != nullptr; }
    void reset() noexcept;
    // Gives up ownership without unmapping (the mapping then lives for the rest of the process).
    void* release() noexcept {
        length_ = 0;
        return std::exchange(base_, nullptr);
    }

private:
    void* base_ = nullptr;
    std::size_t length_ = 0;
};

} // namespace canopy::ipc
