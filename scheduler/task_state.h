#pragma once
// Task identifiers and the states of a task in the scheduler.
//
// Thread safety: plain values and pure functions.

#include <cstdint>

namespace canopy::scheduler {

// Chosen by the daemon; unique among the tasks the scheduler holds.
using TaskId = std::uint64_t;

// A worker that runs the tasks handed to it one after another, in the order handed out (a chip's stream, a
// sub's mailbox), as the daemon numbers it; NO_LANE for a task that has no such worker.
using Lane = std::uint32_t;
inline constexpr Lane NO_LANE = 0;

// WAITING: some task it depends on is unfinished. READY: runnable, not yet handed out by pop_ready.
// RUNNING: handed out. COMPLETED, FAILED: finished; the scheduler forgets a task as it finishes.
enum class TaskState : std::uint8_t { WAITING, READY, RUNNING, COMPLETED, FAILED };

// The TASKSTATE spelling of docs/control-protocol.md: "queued" for WAITING and READY, "running",
// "completed", "failed".
const char* to_string(TaskState state) noexcept;

} // namespace canopy::scheduler
