#pragma once
// Human-readable text for the daemon's replies (docs/control-protocol.md). Each function takes the part
// of a reply that it draws and returns lines ending in '\n'.
//
// Replies come from another process, so every field is read defensively: a missing field or one of an
// unexpected type renders as "-" (or is skipped); rendering never throws.
//
// Thread safety: pure functions.

#include <nlohmann/json.hpp>
#include <string>

namespace canopy::cli {

// The `status` reply: a header line (node, level, daemon pid, uptime), then the worker tree with
// columns WORKER STATE PID DEVICE DONE FAILED RESTARTS UPTIME and LAST EXIT (shown for workers that are
// not running and have one). Workers nest under their parent path ("/node0/chip1" under "/node0");
// DEVICE is BACKEND:INDEX ("sim:0", "cuda:1") or "-" for workers without a backend.
std::string render_status(const nlohmann::json& status);

// A `buffers` array: columns ID NAME (when any buffer has one) BACKEND BYTES ACCESS WHERE, with BYTES
// human and exact ("4.0 MiB (4194304)") and WHERE the world ("chip0,chip1") or else the creator.
std::string render_buffer_list(const nlohmann::json& buffers);

// One BUFFER object as "key  value" lines.
std::string render_buffer(const nlohmann::json& buffer);

// A `tasks` array: columns ID NAME KERNEL ON STATE TIME and ERROR (when any task has one, as
// "CODE: message"). TIME is end_ns - start_ns once the task has run.
std::string render_tasks(const nlohmann::json& tasks);

// "CODE: message" of a TASKSTATE's error; empty when it has none. The tasks table shows it printable (cli/table.h).
std::string task_error_text(const nlohmann::json& task);

// A field as display text: strings as printable (cli/table.h) makes them, numbers in decimal, anything else (or
// absent) as "-".
std::string field_text(const nlohmann::json& object, const char* key);

} // namespace canopy::cli
