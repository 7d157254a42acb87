#include "scheduler/detail/block_pool.h"

#include <algorithm>

namespace canopy::scheduler::detail {

void* BlockPool::allocate(std::size_t size) {
    if (block_size_ == 0) {
        block_size_ = (std::max(size, sizeof(FreeBlock)) + 15) / 16 * 16;
    }
    if (free_ != nullptr) {
        FreeBlock* block = free_;
        free_ = block->next;
        std::destroy_at(block);
        return block;
    }
    if (next_ == end_) {
        const std::size_t blocks = std::max<std::size_t>(1, CHUNK_BYTES / block_size_);
        chunks_.push_back(std::make_unique_for_overwrite<std::byte[]>(blocks * block_size_));
        next_ = chunks_.back().get();
        end_ = next_ + blocks * block_size_;
    }
    void* block = next_;
    next_ += block_size_;
    return block;
}

void BlockPool::deallocate(void* block) noexcept {
    free_ = std::construct_at(static_cast<FreeBlock*>(block), FreeBlock{free_});
}

void BlockPool::release() noexcept {
    chunks_ = std::vector<std::unique_ptr<std::byte[]>>();
    next_ = nullptr;
    end_ = nullptr;
    free_ = nullptr;
}

} // namespace canopy::scheduler::detail
