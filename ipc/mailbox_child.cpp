#include "ipc/mailbox_child.h"

#include "ipc/futex.h"
#include "ipc/sys_error.h"

#include <algorithm>
#include <cstring>
#include <sched.h>
#include <stdexcept>
#include <string>
#include <sys/stat.h>

namespace canopy::ipc {

namespace {
// Spin steps after which a child that shares its CPU with the parent gives up spinning (MailboxChild::next).
constexpr std::uint32_t SHARED_CPU_CHECK_AFTER = 1024;
} // namespace

MailboxChild::MailboxChild(int memfd, std::uint32_t generation) : generation_(generation) {
    struct stat st {};
    sys_check(::fstat(memfd, &st), "fstat(mailbox)");
    if (static_cast<std::uint64_t>(st.st_size) != MAILBOX_BYTES) {
        throw std::runtime_error("mailbox is " + std::to_string(st.st_size) + " bytes, expected " +
                                 std::to_string(MAILBOX_BYTES));
    }
    region_ = MappedRegion::map_shared(memfd, MAILBOX_BYTES, true);
    const MailboxHeader* h = header();
    if (h->magic != MAILBOX_MAGIC || h->layout_version != MAILBOX_LAYOUT_VERSION || h->size != MAILBOX_BYTES ||
        h->frame_count != MAILBOX_FRAMES || h->frame_bytes != sizeof(TaskFrame)) {
        throw std::runtime_error("mailbox header does not match layout version " +
                                 std::to_string(MAILBOX_LAYOUT_VERSION));
    }
    if (h->generation != generation) {
        throw std::runtime_error("mailbox serves generation " + std::to_string(h->generation) + ", child is " +
                                 std::to_string(generation));
    }
}

TaskFrame* MailboxChild::frame(std::uint64_t dispatch_id) const noexcept {
    return reinterpret_cast<TaskFrame*>(region_.data() + sizeof(MailboxHeader) +
                                        (dispatch_id % MAILBOX_FRAMES) * sizeof(TaskFrame));
}

bool MailboxChild::shutdown_requested() const noexcept {
    return header()->shutdown.load(std::memory_order_acquire) != 0 || interrupted_.load(std::memory_order_acquire);
}

bool MailboxChild::next_ready() const noexcept {
    return frame(next_dispatch_)->state.load(std::memory_order_acquire) ==
           static_cast<std::uint32_t>(FrameState::READY);
}

void MailboxChild::interrupt() noexcept {
    interrupted_.store(true, std::memory_order_seq_cst);
    // The word moves, so a next() that read it before this store does not go to sleep on the old value.
    header()->submit_seq.fetch_add(1, std::memory_order_seq_cst);
    futex_wake_all(low_word(&header()->submit_seq));
}

TaskFrame* MailboxChild::next(FrameTrailer& trailer, std::uint32_t spin) {
    TaskFrame* f = frame(next_dispatch_);
    MailboxHeader* h = header();
    auto* word = low_word(&h->submit_seq);
    auto ready = [&] {
        return f->state.load(std::memory_order_acquire) == static_cast<std::uint32_t>(FrameState::READY);
    };
    for (;;) {
        const std::uint32_t budget = spin_.budget(spin);
        for (std::uint32_t i = 0; i < budget; ++i) {
            if (ready()) {
                break;
            }
            if (shutdown_requested()) {
                return nullptr;
            }
            if (i >= SHARED_CPU_CHECK_AFTER && i % SPIN_YIELD_EVERY == SPIN_YIELD_EVERY - 1 &&
                ::sched_getcpu() == h->submit_cpu.load(std::memory_order_relaxed)) {
                // On the CPU the parent submits from, a long spin only takes turns with the parent. Block
                // instead: the parent's wake-up then places this process on a CPU with nothing to run.
                break;
            }
            spin_pause(i);
        }
        if (ready()) {
            spin_.satisfied(spin);
            break;
        }
        const auto blocked_at = std::chrono::steady_clock::now();
        const std::uint32_t seen = word->load(std::memory_order_seq_cst);
        h->child_sleeping.store(1, std::memory_order_seq_cst);
        if (!ready() && !shutdown_requested()) {
            futex_wait(word, seen);
        }
        h->child_sleeping.store(0, std::memory_order_relaxed);
        spin_.blocked(std::chrono::steady_clock::now() - blocked_at, spin);
        if (ready()) {
            break;
        }
        if (shutdown_requested()) {
            return nullptr;
        }
    }
    std::memcpy(&trailer, &f->trailer, sizeof trailer);
    f->state.store(static_cast<std::uint32_t>(FrameState::RUNNING), std::memory_order_relaxed);
    ++next_dispatch_;
    return f;
}

bool MailboxChild::trailer_expected(const FrameTrailer& trailer) const noexcept {
    return trailer.generation == generation_ && trailer.dispatch_id + 1 == next_dispatch_ && trailer.reserved == 0;
}

void MailboxChild::finish(TaskFrame* f, const FrameTrailer& trailer, ErrorCode code, std::string_view message,
                          std::uint64_t start_ns, std::uint64_t end_ns) {
    FrameTrailer now;
    std::memcpy(&now, &f->trailer, sizeof now);
    const bool unchanged = now == trailer;
    FrameResult& r = f->result;
    r.trailer = unchanged ? trailer : now;
    r.error_code = static_cast<std::uint16_t>(code);
    const std::size_t len = std::min<std::size_t>(message.size(), RESULT_MESSAGE_BYTES);
    r.message_len = static_cast<std::uint16_t>(len);
    if (len > 0) { // an empty view's data() may be null, which memcpy must not see
        std::memcpy(r.message, message.data(), len);
    }
    r.start_ns = start_ns;
    r.end_ns = end_ns;
    const bool ok = unchanged && code == ErrorCode::OK;
    f->state.store(static_cast<std::uint32_t>(ok ? FrameState::DONE : FrameState::FAILED), std::memory_order_release);
    MailboxHeader* h = header();
    h->complete_seq.fetch_add(1, std::memory_order_seq_cst);
    if (h->parent_sleeping.load(std::memory_order_seq_cst) != 0) {
        futex_wake_all(low_word(&h->complete_seq));
    }
}

} // namespace canopy::ipc
