#pragma once
// The mailbox: one shared-memory region (a memfd) between a parent and one child, carrying task frames
// one way and results the other. This header is the layout and nothing else; the two ends live in
// ipc/mailbox_parent.h and ipc/mailbox_child.h.
//
// Region = MailboxHeader followed by MAILBOX_FRAMES frames of sizeof(TaskFrame) bytes. Every word a
// process writes while the other may read it is a std::atomic<uint32_t/uint64_t> (lock-free, so it is
// address-free and valid across processes). Offsets only, never pointers.
//
// Frame protocol (frames are used in ring order, slot = dispatch_id % MAILBOX_FRAMES):
//   parent: waits for IDLE, writes trailer, kernel, target, launch and blob, then stores READY (release)
//           and bumps header.submit_seq, waking the child if it sleeps.
//   child:  acquires READY, copies the trailer, stores RUNNING, decodes and validates the blob,
//           materializes, runs, writes the result with the trailer echoed, re-checks that the frame's
//           trailer is unchanged, stores DONE or FAILED (release) and bumps header.complete_seq,
//           waking the parent if it sleeps.
//   parent: acquires DONE/FAILED, checks the echoed trailer equals what it dispatched, reads the
//           result, stores IDLE.
// Anything else (an unknown state, an echoed trailer that does not match, a frame stuck RUNNING when
// the child is gone) poisons the endpoint: its in-flight tasks fail, no other endpoint is affected.
//
// Waits spin briefly, then block on the futex word they watch (submit_seq / complete_seq, low 32 bits)
// after announcing themselves in child_sleeping / parent_sleeping. They never sleep on a timer.

#include "protocol/task_args.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <type_traits>

namespace canopy {

inline constexpr std::uint32_t MAILBOX_MAGIC = 0x58424d43; // "CMBX"
inline constexpr std::uint32_t MAILBOX_LAYOUT_VERSION = 3;
// Frames in flight per child. A graph's tasks for one worker are queued 64 deep, so the worker runs them
// back to back while its completion thread sleeps or waits for the CPU (with 8 frames the service ran
// about 6 % fewer tasks per second on 2 cores). 64 frames of about 7 KiB: 450 KiB per mailbox.
inline constexpr std::uint32_t MAILBOX_FRAMES = 64;
inline constexpr std::uint32_t KERNEL_NAME_BYTES = 64;
inline constexpr std::uint32_t TARGET_PATH_BYTES = 64;
inline constexpr std::uint32_t RESULT_MESSAGE_BYTES = 512;
// Task ids a frame may name in `after`: earlier frames of this mailbox that the task is ordered behind.
inline constexpr std::uint32_t MAX_FRAME_AFTER = 8;

enum class FrameState : std::uint32_t { IDLE = 0, READY = 1, RUNNING = 2, DONE = 3, FAILED = 4 };

struct FrameTrailer {
    std::uint64_t task_id;
    std::uint64_t dispatch_id; // unique per endpoint, increasing
    std::uint32_t generation;  // the child incarnation the frame was written for
    std::uint32_t reserved;
    friend bool operator==(const FrameTrailer&, const FrameTrailer&) = default;
};
static_assert(sizeof(FrameTrailer) == 24);

// Grid and block shape for device kernels; ignored by CPU workers and by the built-in kernels, which size
// their own launches. A module kernel (kernel name NAME:function, protocol/module_launch.h) runs with exactly
// this shape, and `scalar_slots` gives the order of its parameters: bit i set means parameter i is the next
// scalar of the TaskArgs blob, clear means the next tensor. Bits at and past tensors + scalars are zero. For a
// built-in kernel the same word holds its launch flags (protocol/builtin_launch.h), 0 when none is set.
struct LaunchConfig {
    std::uint32_t grid[3];
    std::uint32_t block[3];
    std::uint32_t shared_bytes; // dynamic shared memory per block, bytes
    std::uint32_t scalar_slots; // module kernels: bit i set = parameter i is a scalar; built-ins: launch flags
};
static_assert(sizeof(LaunchConfig) == 32);
static_assert(std::is_trivially_copyable_v<LaunchConfig> && std::is_standard_layout_v<LaunchConfig>);
static_assert(offsetof(LaunchConfig, grid) == 0);
static_assert(offsetof(LaunchConfig, block) == 12);
static_assert(offsetof(LaunchConfig, shared_bytes) == 24);
static_assert(offsetof(LaunchConfig, scalar_slots) == 28);

struct FrameResult {
    FrameTrailer trailer;      // echo of the trailer the child ran
    std::uint16_t error_code;  // ErrorCode; 0 on success
    std::uint16_t message_len; // bytes of message in use
    std::uint32_t reserved;
    std::uint64_t start_ns; // CLOCK_MONOTONIC when the kernel started, in the child
    std::uint64_t end_ns;   // CLOCK_MONOTONIC when it ended
    char message[RESULT_MESSAGE_BYTES];
};

struct alignas(64) TaskFrame {
    std::atomic<std::uint32_t> state; // FrameState
    std::uint32_t reserved0;
    std::uint8_t pad0[56];
    FrameTrailer trailer;
    char kernel[KERNEL_NAME_BYTES]; // NUL-padded
    char target[TARGET_PATH_BYTES]; // path below the child ("" = the child itself); NUL-padded
    LaunchConfig launch;
    std::uint32_t blob_len;
    std::uint32_t timeout_ms; // 0: none; a nested supervisor enforces it on its own worker
    // The task runs only if every task named here succeeded; each is in an earlier frame of this mailbox (in
    // ring order), which the child has taken before this one. A child fails the task DEPENDENCY_FAILED, without
    // running it, when one of them failed, and refuses a count above MAX_FRAME_AFTER or an id it did not take.
    std::uint32_t after_count;
    std::uint32_t reserved1;
    std::uint64_t after[MAX_FRAME_AFTER];
    std::byte blob[MAX_TASK_ARGS_BYTES];
    alignas(64) FrameResult result;
};

struct alignas(64) MailboxHeader {
    std::uint32_t magic;
    std::uint32_t layout_version;
    std::uint64_t size; // bytes of the whole region
    std::int32_t child_pid;
    std::uint32_t frame_count;
    std::uint32_t frame_bytes;
    std::uint32_t generation;                            // child incarnation this region serves
    alignas(64) std::atomic<std::uint64_t> submit_seq;   // bumped by the parent per READY frame (and by a child
                                                         // that interrupts its own wait): a wake-up word only
    std::atomic<std::uint32_t> child_sleeping;           // child is (about to be) in FUTEX_WAIT
    std::atomic<std::int32_t> submit_cpu;                // CPU of the parent's last submit; -1 before the first
    alignas(64) std::atomic<std::uint64_t> complete_seq; // bumped by the child per finished frame
    std::atomic<std::uint32_t> parent_sleeping;          // parent is (about to be) in FUTEX_WAIT
    alignas(64) std::atomic<std::uint32_t> shutdown;     // non-zero: the child exits its loop
};

static_assert(std::atomic<std::uint32_t>::is_always_lock_free);
static_assert(std::atomic<std::uint64_t>::is_always_lock_free);
static_assert(std::is_standard_layout_v<TaskFrame>);
static_assert(std::is_standard_layout_v<MailboxHeader>);
static_assert(offsetof(TaskFrame, state) == 0);
static_assert(offsetof(TaskFrame, trailer) == 64);
static_assert(offsetof(TaskFrame, after) % 8 == 0);
static_assert(offsetof(TaskFrame, blob) % 8 == 0);
static_assert(offsetof(TaskFrame, result) % 64 == 0);
static_assert(offsetof(MailboxHeader, submit_seq) == 64);
static_assert(offsetof(MailboxHeader, complete_seq) == 128);
static_assert(offsetof(MailboxHeader, shutdown) == 192);

inline constexpr std::size_t MAILBOX_BYTES = sizeof(MailboxHeader) + MAILBOX_FRAMES * sizeof(TaskFrame);

} // namespace canopy
