#pragma once
// BufferMapping: a buffer's bytes mapped into this process from the fds that `buffer.fd` hands over
// (Connection::map), so that the client reads and writes them without a copy through the daemon.
//
// The ordering rule (docs/control-protocol.md, `buffer.fd`): the mapping shows what every task submitted before
// Connection::map wrote; bytes written through it are seen by tasks submitted after the write; bytes that a running
// task writes are not to be read before it has finished (wait on it, or map again). The mapping stays valid memory
// after the buffer's release, but the daemon then orders nothing over it.
//
// One region per rank: a posix_shm buffer has one, a sim_vmm buffer one per chip of its world (one for a plain
// vmm buffer). A read-only mapping (MapAccess::READ, or a fd the daemon handed out read-only) gives only cbytes().
//
// Ownership: owns the mappings (the fds are closed once mapped); unmaps them on destruction. Move-only.
// Thread safety: the object is used by one thread at a time; the memory may be shared with any thread or process.

#include "client/types.h"

#include <cstddef>
#include <span>
#include <vector>

namespace canopy::client {

enum class MapAccess { READ, READWRITE };

class BufferMapping {
public:
    BufferMapping() = default;
    BufferMapping(BufferMapping&& other) noexcept;
    BufferMapping& operator=(BufferMapping&& other) noexcept;
    BufferMapping(const BufferMapping&) = delete;
    BufferMapping& operator=(const BufferMapping&) = delete;
    ~BufferMapping();

    const BufferInfo& buffer() const noexcept { return buffer_; }
    bool writable() const noexcept { return writable_; }
    std::size_t ranks() const noexcept { return regions_.size(); }
    std::size_t size() const noexcept { return static_cast<std::size_t>(buffer_.nbytes); }

    // The bytes of rank `rank`'s copy (0 for a buffer without a world). Throws std::out_of_range past ranks(), and
    // bytes() throws std::logic_error for a read-only mapping.
    std::span<std::byte> bytes(std::size_t rank = 0) const;
    std::span<const std::byte> cbytes(std::size_t rank = 0) const;
    // The bytes as elements of T (trivially copyable), size() / sizeof(T) of them.
    template <class T>
    std::span<T> as(std::size_t rank = 0) const {
        const auto b = bytes(rank);
        return {reinterpret_cast<T*>(b.data()), b.size() / sizeof(T)};
    }
    template <class T>
    std::span<const T> cas(std::size_t rank = 0) const {
        const auto b = cbytes(rank);
        return {reinterpret_cast<const T*>(b.data()), b.size() / sizeof(T)};
    }

private:
    friend class Connection;
    struct Region {
        void* base = nullptr;
        std::size_t length = 0;
    };
    // Maps each fd whole (`length` bytes, shared). Throws std::system_error naming mmap.
    BufferMapping(BufferInfo buffer, bool writable, const std::vector<int>& fds);
    void unmap() noexcept;

    BufferInfo buffer_;
    bool writable_ = false;
    std::vector<Region> regions_;
};

} // namespace canopy::client
