#include "scheduler/detail/ready_queue.h"

#include <algorithm>

namespace canopy::scheduler::detail {
namespace {

// Heap order: the smallest submission number on top.
bool later(const ReadyQueue::Entry& a, const ReadyQueue::Entry& b) noexcept {
    return a.seq > b.seq;
}

template <class T>
void reserve_more(std::vector<T>& v, std::size_t n) {
    if (v.capacity() - v.size() < n) {
        v.reserve(std::max(v.size() + n, 2 * v.capacity()));
    }
}

} // namespace

void ReadyQueue::reserve_added(std::size_t n) {
    if (fifo_.capacity() - fifo_.size() < n && head_ > 0) {
        fifo_.erase(fifo_.begin(), fifo_.begin() + static_cast<std::ptrdiff_t>(head_));
        head_ = 0;
    }
    reserve_more(fifo_, n);
}

void ReadyQueue::reserve_woken(std::size_t n) {
    reserve_more(heap_, n);
}

void ReadyQueue::push_added(Entry entry) noexcept {
    fifo_.push_back(entry);
}

void ReadyQueue::push_woken(Entry entry) noexcept {
    heap_.push_back(entry);
    std::push_heap(heap_.begin(), heap_.end(), later);
}

std::optional<ReadyQueue::Entry> ReadyQueue::pop() noexcept {
    const bool have_fifo = head_ < fifo_.size();
    if (!have_fifo && heap_.empty()) {
        return std::nullopt;
    }
    if (have_fifo && (heap_.empty() || fifo_[head_].seq < heap_.front().seq)) {
        const Entry entry = fifo_[head_++];
        if (head_ == fifo_.size()) {
            fifo_.clear();
            head_ = 0;
        }
        return entry;
    }
    std::pop_heap(heap_.begin(), heap_.end(), later);
    const Entry entry = heap_.back();
    heap_.pop_back();
    return entry;
}

std::optional<ReadyQueue::Entry> ReadyQueue::top() const noexcept {
    const bool have_fifo = head_ < fifo_.size();
    if (!have_fifo && heap_.empty()) {
        return std::nullopt;
    }
    if (have_fifo && (heap_.empty() || fifo_[head_].seq < heap_.front().seq)) {
        return fifo_[head_];
    }
    return heap_.front();
}

void ReadyQueue::clear() noexcept {
    fifo_ = std::vector<Entry>();
    head_ = 0;
    heap_ = std::vector<Entry>();
}

} // namespace canopy::scheduler::detail
