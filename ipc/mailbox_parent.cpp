#include "ipc/mailbox_parent.h"

#include "ipc/futex.h"
#include "ipc/sys_error.h"

#include <algorithm>
#include <cstring>
#include <ctime>
#include <new>
#include <sched.h>
#include <sys/mman.h>

namespace canopy::ipc {
namespace {

std::uint64_t monotonic_ns() noexcept {
    timespec ts{};
    ::clock_gettime(CLOCK_MONOTONIC, &ts);
    return static_cast<std::uint64_t>(ts.tv_sec) * 1000000000ULL + static_cast<std::uint64_t>(ts.tv_nsec);
}

void copy_field(char* dst, std::size_t capacity, std::string_view value, const char* what) {
    if (value.size() >= capacity) {
        throw std::invalid_argument(std::string(what) + " '" + std::string(value.substr(0, 80)) + "' is longer than " +
                                    std::to_string(capacity - 1) + " bytes");
    }
    std::memset(dst, 0, capacity);
    if (!value.empty()) {
        std::memcpy(dst, value.data(), value.size());
    }
}

} // namespace

MailboxParent::MailboxParent(std::uint32_t generation) : generation_(generation) {
    fd_ = UniqueFd(sys_check(::memfd_create("canopy-mailbox", MFD_CLOEXEC), "memfd_create"));
    sys_check(::ftruncate(fd_.get(), static_cast<off_t>(MAILBOX_BYTES)), "ftruncate");
    region_ = MappedRegion::map_shared(fd_.get(), MAILBOX_BYTES, true);
    // The region is zero-filled; atomics are constructed in place (lock-free atomics are address-free).
    auto* h = new (region_.data()) MailboxHeader{};
    h->magic = MAILBOX_MAGIC;
    h->layout_version = MAILBOX_LAYOUT_VERSION;
    h->size = MAILBOX_BYTES;
    h->frame_count = MAILBOX_FRAMES;
    h->frame_bytes = sizeof(TaskFrame);
    h->generation = generation;
    h->submit_cpu.store(-1, std::memory_order_relaxed);
    for (std::uint32_t i = 0; i < MAILBOX_FRAMES; ++i) {
        new (region_.data() + sizeof(MailboxHeader) + i * sizeof(TaskFrame)) TaskFrame{};
    }
}

void MailboxParent::set_child_pid(int pid) noexcept {
    header()->child_pid = pid;
}

TaskFrame* MailboxParent::frame(std::uint64_t dispatch_id) const noexcept {
    return reinterpret_cast<TaskFrame*>(region_.data() + sizeof(MailboxHeader) +
                                        (dispatch_id % MAILBOX_FRAMES) * sizeof(TaskFrame));
}

bool MailboxParent::can_submit() const noexcept {
    // The span, not in_flight(): a slot collected ahead of an older frame is not reused before that frame is.
    return next_dispatch_ - next_complete_ < MAILBOX_FRAMES &&
           frame(next_dispatch_)->state.load(std::memory_order_acquire) == static_cast<std::uint32_t>(FrameState::IDLE);
}

std::uint64_t MailboxParent::submit(const Dispatch& d) {
    if (d.blob.size() > MAX_TASK_ARGS_BYTES) {
        throw std::invalid_argument("task arguments of " + std::to_string(d.blob.size()) + " bytes exceed " +
                                    std::to_string(MAX_TASK_ARGS_BYTES));
    }
    if (d.after.size() > MAX_FRAME_AFTER) {
        throw std::invalid_argument("a frame names at most " + std::to_string(MAX_FRAME_AFTER) +
                                    " tasks to run after, got " + std::to_string(d.after.size()));
    }
    const bool was_idle = in_flight() == 0;
    TaskFrame* f = frame(next_dispatch_);
    copy_field(f->kernel, KERNEL_NAME_BYTES, d.kernel, "kernel name");
    copy_field(f->target, TARGET_PATH_BYTES, d.target, "target path");
    const FrameTrailer trailer{d.task_id, next_dispatch_, generation_, 0};
    f->trailer = trailer;
    f->launch = d.launch;
    f->blob_len = static_cast<std::uint32_t>(d.blob.size());
    f->timeout_ms = d.timeout_ms;
    f->after_count = static_cast<std::uint32_t>(d.after.size());
    f->reserved1 = 0;
    std::fill(std::begin(f->after), std::end(f->after), std::uint64_t{0});
    std::copy(d.after.begin(), d.after.end(), f->after);
    std::memcpy(f->blob, d.blob.data(), d.blob.size());
    sent_[next_dispatch_ % MAILBOX_FRAMES] = trailer;
    header()->submit_cpu.store(::sched_getcpu(), std::memory_order_relaxed);
    f->state.store(static_cast<std::uint32_t>(FrameState::READY), std::memory_order_release);
    header()->submit_seq.fetch_add(1, std::memory_order_seq_cst);
    if (header()->child_sleeping.load(std::memory_order_seq_cst) != 0) {
        wake_child();
    }
    if (was_idle && wake_waiter_on_submit_ && header()->parent_sleeping.load(std::memory_order_seq_cst) != 0) {
        // The result waiter sleeps without spinning while nothing is in flight: wake it now, so that it is
        // spinning when this frame finishes instead of being woken by the child then. A waiter that has not
        // announced itself yet is woken by the child as always.
        wake_waiters();
    }
    return next_dispatch_++;
}

std::optional<std::uint64_t> MailboxParent::finished() const noexcept {
    for (std::uint64_t d = next_complete_; d < next_dispatch_; ++d) {
        if (collected_[d % MAILBOX_FRAMES]) {
            continue;
        }
        const auto state = frame(d)->state.load(std::memory_order_acquire);
        if (state != static_cast<std::uint32_t>(FrameState::READY) &&
            state != static_cast<std::uint32_t>(FrameState::RUNNING)) {
            return d; // DONE or FAILED; any other state poisons the mailbox in poll()
        }
        if (!any_order_) {
            break;
        }
    }
    return std::nullopt;
}

std::optional<Completion> MailboxParent::poll() {
    const std::optional<std::uint64_t> done = finished();
    if (!done) {
        return std::nullopt;
    }
    const std::uint64_t d = *done;
    TaskFrame* f = frame(d);
    const auto state = f->state.load(std::memory_order_acquire);
    if (state != static_cast<std::uint32_t>(FrameState::DONE) &&
        state != static_cast<std::uint32_t>(FrameState::FAILED)) {
        throw MailboxPoisoned("frame " + std::to_string(d % MAILBOX_FRAMES) + " in unexpected state " +
                              std::to_string(state));
    }
    const FrameTrailer& sent = sent_[d % MAILBOX_FRAMES];
    if (!(f->result.trailer == sent)) {
        throw MailboxPoisoned("result trailer {task " + std::to_string(f->result.trailer.task_id) + ", dispatch " +
                              std::to_string(f->result.trailer.dispatch_id) + ", generation " +
                              std::to_string(f->result.trailer.generation) + "} does not match the dispatched {task " +
                              std::to_string(sent.task_id) + ", dispatch " + std::to_string(sent.dispatch_id) +
                              ", generation " + std::to_string(sent.generation) + "}");
    }
    Completion c;
    c.task_id = sent.task_id;
    c.dispatch_id = sent.dispatch_id;
    c.code = static_cast<ErrorCode>(f->result.error_code);
    if (state == static_cast<std::uint32_t>(FrameState::FAILED) && c.code == ErrorCode::OK) {
        c.code = ErrorCode::KERNEL_FAILED;
    }
    if (static_cast<std::uint16_t>(c.code) > ERROR_CODE_MAX) {
        throw MailboxPoisoned("result carries unknown error code " + std::to_string(f->result.error_code));
    }
    const std::size_t len = std::min<std::size_t>(f->result.message_len, RESULT_MESSAGE_BYTES);
    c.message.assign(f->result.message, len);
    c.start_ns = f->result.start_ns;
    c.end_ns = f->result.end_ns;
    f->state.store(static_cast<std::uint32_t>(FrameState::IDLE), std::memory_order_release);
    if (d != next_complete_) {
        collected_[d % MAILBOX_FRAMES] = true;
        ++collected_ahead_;
        return c;
    }
    ++next_complete_;
    while (next_complete_ < next_dispatch_ && collected_[next_complete_ % MAILBOX_FRAMES]) {
        collected_[next_complete_ % MAILBOX_FRAMES] = false;
        --collected_ahead_;
        ++next_complete_;
    }
    return c;
}

bool MailboxParent::wait(std::uint64_t timeout_ns, std::uint32_t spin) {
    auto ready = [&] { return finished().has_value(); };
    for (std::uint32_t i = 0; i < spin; ++i) {
        if (ready()) {
            return true;
        }
        spin_pause(i);
    }
    MailboxHeader* h = header();
    auto* word = low_word(&h->complete_seq);
    const std::uint64_t deadline = timeout_ns == 0 ? 0 : monotonic_ns() + timeout_ns;
    const std::uint32_t seen = word->load(std::memory_order_seq_cst);
    h->parent_sleeping.store(1, std::memory_order_seq_cst);
    if (!ready()) {
        if (deadline == 0) {
            futex_wait(word, seen);
        } else {
            const std::uint64_t now = monotonic_ns();
            if (now < deadline) {
                futex_wait_for(word, seen, deadline - now);
            }
        }
    }
    h->parent_sleeping.store(0, std::memory_order_relaxed);
    return ready();
}

std::uint32_t MailboxParent::activity() const noexcept {
    return low_word(&header()->complete_seq)->load(std::memory_order_seq_cst);
}

void MailboxParent::wait_activity(std::uint32_t seen, std::uint32_t spin) noexcept {
    MailboxHeader* h = header();
    auto* word = low_word(&h->complete_seq);
    const std::uint32_t budget = spin == 0 ? 0 : activity_spin_.budget(spin);
    for (std::uint32_t i = 0; i < budget; ++i) {
        if (word->load(std::memory_order_acquire) != seen) {
            activity_spin_.satisfied(spin);
            return;
        }
        spin_pause(i);
    }
    const auto blocked_at = std::chrono::steady_clock::now();
    h->parent_sleeping.store(1, std::memory_order_seq_cst);
    if (word->load(std::memory_order_seq_cst) == seen) {
        futex_wait(word, seen);
    }
    h->parent_sleeping.store(0, std::memory_order_relaxed);
    if (spin > 0) {
        activity_spin_.blocked(std::chrono::steady_clock::now() - blocked_at, spin);
    }
}

void MailboxParent::wake_waiters() noexcept {
    MailboxHeader* h = header();
    h->complete_seq.fetch_add(1, std::memory_order_seq_cst); // a changed word cannot lose the wake
    futex_wake_all(low_word(&h->complete_seq));
}

void MailboxParent::wake_child() noexcept {
    futex_wake_all(low_word(&header()->submit_seq));
}

void MailboxParent::request_shutdown() noexcept {
    header()->shutdown.store(1, std::memory_order_seq_cst);
    header()->submit_seq.fetch_add(1, std::memory_order_seq_cst);
    wake_child();
}

std::vector<std::pair<std::uint64_t, std::uint64_t>> MailboxParent::in_flight_tasks() const {
    std::vector<std::pair<std::uint64_t, std::uint64_t>> out;
    for (std::uint64_t d = next_complete_; d < next_dispatch_; ++d) {
        if (!collected_[d % MAILBOX_FRAMES]) {
            out.emplace_back(d, sent_[d % MAILBOX_FRAMES].task_id);
        }
    }
    return out;
}

} // namespace canopy::ipc
