#pragma once
// The main loop of a chip or sub worker process: take the next frame from the mailbox, check its
// trailer, decode the TaskArgs blob (the one gate: validate_tensor on every argument), materialize every
// tensor through the import registry, run the kernel, publish the result. A rejected argument fails
// the task with the WireError text and its error code; nothing runs.
//
// Frames whose kernel starts with '@' are control frames from the parent:
//   @release  blob = a CanonicalIdentity; the worker drops its mapping of that buffer.
//   @noop     decodes, validates and materializes its arguments like any task, then runs nothing
//             (the dispatch path alone: liveness checks and benchmarks).
//   @vmm_create  (chips) blob = one OUTPUT tensor over the descriptor of a new device buffer of this chip, and
//             for one rank of a symmetric buffer an int64 scalar, the rank. The chip creates the backing (a
//             memfd on a sim chip, cuMemCreate on a cuda chip) and hands its fd to the parent (FD_OFFER)
//             before it completes the frame; the parent holds the fd for the buffer's lifetime.
//
// run_worker is the CPU worker (sim chips and subs). The pieces every worker kind shares (cuda chips and
// nested nodes too) are below it: serve_frames (the loop itself, with the trailer and blob-length checks), the
// FrameRunner that a worker kind supplies, the mapping from an exception to a published result, and the
// READY / FATAL messages.
//
// Thread safety: serve_frames runs on one thread; a FrameDone may publish from any thread.

#include "ipc/mailbox_child.h"
#include "ipc/unique_fd.h"
#include "protocol/error.h"
#include "protocol/identity.h"
#include "protocol/task_args.h"
#include "worker/frame_order.h"
#include "worker/import_registry.h"
#include "worker/kernels/builtin.h"

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace canopy::worker {

struct WorkerSpec {
    kernels::WorkerKind kind = kernels::WorkerKind::SUB;
    std::string path; // "/chip0", for messages
    std::uint32_t generation = 1;
    bool fault_kernels = false;
    // Fork-inherited arenas [base, base + length) this process may resolve FORK_* descriptors into.
    std::vector<std::pair<std::uintptr_t, std::size_t>> arenas;
};

// Serves the mailbox until the parent requests shutdown or closes the control socket; returns the
// process exit code. Sends READY over `control` once the mailbox is mapped.
int run_worker(const WorkerSpec& spec, ipc::UniqueFd mailbox, ipc::UniqueFd control);

// CLOCK_MONOTONIC in nanoseconds.
std::uint64_t monotonic_ns() noexcept;

// The result a frame is published with. With `exit_after` the worker stops serving once the result is
// published and its process exits with status 1, so that the supervisor restarts it: the worker's state can
// no longer be trusted (a CUDA context after a sticky error).
struct TaskOutcome {
    ErrorCode code = ErrorCode::OK;
    std::string message;
    bool exit_after = false;
};

// The outcome for the exception being handled; call it only inside a catch block. A WireError, ImportError or
// kernels::KernelError keeps its code and message; any other exception is KERNEL_FAILED "KERNEL: what()".
TaskOutcome outcome_of_current_exception(std::string_view kernel);

// An @vmm_create frame's request: the new buffer's descriptor (inside `args`) and its rank in a symmetric
// buffer, or ipc::NOT_SYMMETRIC.
struct VmmCreate {
    const BufferDescriptor* descriptor;
    std::uint16_t rank;
};
// Throws KernelError(BAD_REQUEST) for arguments that are not one OUTPUT tensor and at most one int64 rank.
VmmCreate decode_vmm_create(const TaskArgs& args);

// One READY frame as a runner sees it: its kernel name, the path below the child it is for (nested nodes; empty
// for the child itself), its launch configuration, its TaskArgs bytes (at most MAX_TASK_ARGS_BYTES, not yet
// decoded) and the timeout a nested node enforces on its own worker (0: none).
struct FrameView {
    std::string_view kernel;
    std::string_view target;
    LaunchConfig launch{};
    std::span<const std::byte> blob;
    std::uint32_t timeout_ms = 0;
    std::uint64_t task_id = 0;
    std::span<const std::uint64_t> after; // TaskFrame::after, all MAX_FRAME_AFTER slots
    std::uint32_t after_count = 0;        // as the frame says; run() refuses one above after.size()
};

// Publishes the result of one frame. It may be copied and called from any thread, but exactly one call may be
// made per frame: the frame is reused for a later task once its result was taken.
class FrameDone {
public:
    FrameDone(ipc::MailboxChild& mailbox, TaskFrame* frame, const FrameTrailer& trailer, std::uint64_t start_ns)
        : mailbox_(&mailbox), frame_(frame), trailer_(trailer), start_ns_(start_ns) {}
    // With the run's own times (a task a nested node ran below it).
    void operator()(ErrorCode code, std::string_view message, std::uint64_t start_ns, std::uint64_t end_ns) const;
    // Timed from the frame's start to now.
    void operator()(const TaskOutcome& outcome) const;

private:
    ipc::MailboxChild* mailbox_;
    TaskFrame* frame_;
    FrameTrailer trailer_;
    std::uint64_t start_ns_;
};

// What one worker kind does with a frame. run() is the one dispatch every worker kind shares (chips, subs and
// nested nodes), and never throws:
//   order              a frame ordered after a task that failed fails DEPENDENCY_FAILED, and runs nothing
//                      (FrameOrder); every frame's outcome is remembered for the frames after it
//   @release           release(the identity)
//   refuse(kernel)     a frame this kind refuses before decoding (e.g. module frames on CPU workers)
//   decode             decode_task_args_into(blob, args_): validate_tensor on every argument, the one gate
//   @vmm_create        create_vmm(the request)
//   run_control()      the control frames this kind serves itself (e.g. @module_load:NAME on cuda chips)
//   bind()             materialize every tensor of args_
//   @noop              nothing more; any other '@' frame is UNKNOWN_KERNEL
//   execute()          the kernel
// An exception from any step becomes the outcome failure() makes of it. A step may instead hand the frame on
// (a nested node forwards it to its own supervisor): it calls defer() for the frame's FrameDone as its last
// act, after everything that can throw, and that FrameDone publishes the result later; run() then returns
// nullopt. frame() is the frame being run.
class FrameRunner {
public:
    virtual ~FrameRunner() = default;
    std::optional<TaskOutcome> run(const FrameView& frame, const FrameDone& done) noexcept;
    // Runs on the frame loop before it takes the next frame; `next_ready` says whether that frame already
    // waits (the loop takes it at once) or the loop may block until one comes. A runner that holds finished
    // launches back to report them in a batch must hand them on when `next_ready` is false: no later frame
    // is there to do it. Never throws.
    virtual void before_next(bool /*next_ready*/) noexcept {}

protected:
    virtual void release(const CanonicalIdentity& id) = 0;
    virtual std::optional<TaskOutcome> refuse(std::string_view /*kernel*/) { return std::nullopt; }
    virtual void create_vmm(const VmmCreate& request) = 0;
    virtual bool run_control(std::string_view /*kernel*/) { return false; }
    virtual void bind() = 0;
    virtual void execute(std::string_view kernel, const LaunchConfig& launch) = 0;
    // The outcome of the exception being handled (called inside a catch block).
    virtual TaskOutcome failure(std::string_view kernel) { return outcome_of_current_exception(kernel); }

    const FrameView& frame() const noexcept { return *frame_; }
    FrameDone defer() noexcept;

    TaskArgs args_; // the frame being run, decoded

private:
    std::optional<TaskOutcome> run_steps(const FrameView& frame) noexcept;

    FrameOrder order_;
    const FrameView* frame_ = nullptr;
    const FrameDone* done_ = nullptr;
    bool deferred_ = false;
};

// The refusal of a CPU worker (a sim chip or a sub) for a module kernel (NAME:function) or a module control frame
// (@module_load:NAME, @module_unload:NAME): UNKNOWN_KERNEL, "sim chip /chip1 cannot run module kernel m:f
// (module kernels run on cuda chips)". nullopt for any other kernel.
std::optional<TaskOutcome> refuse_module(const WorkerSpec& spec, std::string_view kernel);

// Serves `mailbox` until shutdown is requested: tells `runner` before_next() before each frame, takes each READY
// frame in ring order, fails a frame with a stale trailer (BAD_REQUEST) or a blob longer than the frame
// (INVALID_TENSOR) without running it, hands every other one to `runner`, and publishes the outcome (or leaves it
// to the FrameDone the runner deferred).
// Returns 0 at shutdown, 1 after an outcome with exit_after.
int serve_frames(ipc::MailboxChild& mailbox, FrameRunner& runner);

// The identity an @release frame names. Throws KernelError(BAD_REQUEST) for a blob that is not one identity,
// WireError for an invalid one.
CanonicalIdentity decode_release(std::span<const std::byte> blob);

// Asks the parent for the fd(s) of a VMM buffer by identity (FD_REQUEST) and waits for its FD_REPLY on
// `control`. Throws ImportError with the parent's code and text when it refuses.
VmmFds request_fds(int control, const BufferDescriptor& d);

// Hands the parent the fd of a VMM allocation this worker created for `d` (FD_OFFER), as rank `rank` of a
// symmetric buffer or ipc::NOT_SYMMETRIC. Throws ipc::SysError.
void send_fd_offer(int control, const BufferDescriptor& d, std::uint16_t rank, int fd);

// The exit status of a child that sent FATAL (EX_CONFIG).
inline constexpr int FATAL_EXIT_CODE = 78;

// Control messages to the parent. send_fatal reports why this child cannot serve (the parent does not
// restart it); the text is cut to what one message carries. It never throws. A READY's text is empty but for a
// remote link's, which names its session (ipc::ChildMessageType::READY).
void send_ready(int control, const std::string& text = {});
void send_fatal(int control, const std::string& why) noexcept;
// Reports that this child ends because what it stands for cannot be reached (ipc::ChildMessageType::LOST).
void send_lost(int control, const std::string& why) noexcept;

} // namespace canopy::worker
