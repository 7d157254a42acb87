#pragma once
// BlockPool: fixed-size blocks carved from 64 KiB chunks and recycled through a free list, and
// PoolAllocator, the allocator that makes node-based standard containers take their nodes from one.
//
// The access index allocates and frees one tree node per tensor access; from the pool that is a pointer
// pop, where the general-purpose allocator takes a slow path for nodes of this size.
//
// The first allocation fixes the block size (rounded up to 16 bytes); a PoolAllocator sends requests for
// more than one object, or for objects larger than a block, to std::allocator.
//
// Ownership: the pool owns its chunks and frees them when destroyed or on release(). Blocks are handed out
// uninitialized. Lifetime: every container using the pool must be destroyed (or emptied) before it.
// Thread safety: none; the owner serializes all calls.

#include <cstddef>
#include <memory>
#include <vector>

namespace canopy::scheduler::detail {

class BlockPool {
public:
    BlockPool() = default;
    BlockPool(const BlockPool&) = delete;
    BlockPool& operator=(const BlockPool&) = delete;

    // 0 until the first allocation.
    std::size_t block_size() const noexcept { return block_size_; }
    // A block of block_size() bytes, aligned to 16; the first call sets block_size() from `size`.
    void* allocate(std::size_t size);
    void deallocate(void* block) noexcept;
    // Frees every chunk. REQUIRES every block to have been deallocated.
    void release() noexcept;

private:
    static constexpr std::size_t CHUNK_BYTES = 64 * 1024;
    struct FreeBlock {
        FreeBlock* next;
    };

    std::size_t block_size_ = 0;
    std::vector<std::unique_ptr<std::byte[]>> chunks_;
    std::byte* next_ = nullptr; // the unused rest of the newest chunk
    std::byte* end_ = nullptr;
    FreeBlock* free_ = nullptr;
};

template <class T>
class PoolAllocator {
public:
    using value_type = T;

    explicit PoolAllocator(BlockPool* pool) noexcept : pool_(pool) {}
    template <class U>
    PoolAllocator(const PoolAllocator<U>& other) noexcept : pool_(other.pool()) {}

    T* allocate(std::size_t n) {
        if (n == 1 && fits()) {
            return static_cast<T*>(pool_->allocate(sizeof(T)));
        }
        return std::allocator<T>{}.allocate(n);
    }
    void deallocate(T* p, std::size_t n) noexcept {
        if (n == 1 && fits()) {
            pool_->deallocate(p);
        } else {
            std::allocator<T>{}.deallocate(p, n);
        }
    }

    BlockPool* pool() const noexcept { return pool_; }
    friend bool operator==(const PoolAllocator& a, const PoolAllocator& b) noexcept { return a.pool_ == b.pool_; }

private:
    static_assert(alignof(T) <= 16, "pool blocks are aligned to 16 bytes");
    bool fits() const noexcept { return pool_->block_size() == 0 || sizeof(T) <= pool_->block_size(); }

    BlockPool* pool_;
};

} // namespace canopy::scheduler::detail
