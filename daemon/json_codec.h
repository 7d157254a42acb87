#pragma once
// Conversions between the control protocol's JSON (docs/control-protocol.md) and canopy's types: tensor
// and scalar arguments, tasks, buffers, workers. Parsing is the boundary where a client's bytes become
// typed values, so every tensor passes validate_tensor here before anything else sees it.
//
// Thread safety: pure functions.

#include "daemon/buffer_registry.h"
#include "daemon/run_request.h"
#include "daemon/supervisor.h"
#include "daemon/task.h"

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

namespace canopy::daemon {

// Resolves a buffer ID (identity string or preloaded arena name) to the live buffer's descriptor.
// Throws RequestError (UNKNOWN_BUFFER, STALE_BUFFER, INVALID_DESCRIPTOR).
using BufferResolver = std::function<BufferDescriptor(const std::string& id, const std::string& where)>;

struct ParsedTask {
    std::string name;
    TaskRequest request;
};

// Parses one TASK object. `where` prefixes error messages ("tasks[2]"). Throws RequestError:
// BAD_REQUEST for shape errors of the JSON and for numbers a field cannot hold (daemon/json_numbers.h),
// INVALID_TENSOR for a view the gate refuses or whose omitted row-major strides do not fit 32 bits, and
// whatever the resolver throws.
ParsedTask parse_task(const nlohmann::json& task, const BufferResolver& resolve, const std::string& where);

// A task the fast path read (daemon/run_request.h), its buffers resolved and its tensors through the gate:
// what parse_task returns for the same JSON, with the same error where parse_task would throw one. Moves the
// strings out of `raw` when it returns.
ParsedTask task_from_raw(RawTask& raw, const BufferResolver& resolve, const std::string& where);

// "r", "w", "rw" <-> Access; throws RequestError(BAD_REQUEST).
Access parse_access(const std::string& text);
std::string access_short(Access a);

nlohmann::json buffer_json(const BufferInfo& info);
nlohmann::json worker_json(const WorkerStatus& w);

// The worker tree a supervisor sends up a level (a nested node's STATUS_REPLY, a remote node's status event):
// a JSON array of worker_json objects, and back. workers_to_json writes bytes that are not UTF-8 as U+FFFD.
// workers_from_json reads text another process wrote: it takes an array of objects, each with a non-empty "path" and a
// known "state"; "kind", "backend", "last_exit" (strings), "device", "restarts" (unsigned 32-bit), "pid" (-1..pid_t
// max), "tasks_done", "tasks_failed" (unsigned 64-bit) and "uptime_s" (a number >= 0) are optional and checked when
// present; other keys are ignored, but no value may be an array or an object (the text is parsed at most two levels
// deep). Anything else throws RequestError(BAD_REQUEST) naming the entry and field ("[2].pid: ..."), and nothing is
// cast or wrapped.
std::string workers_to_json(const std::vector<WorkerStatus>& workers);
std::vector<WorkerStatus> workers_from_json(std::string_view text);
// Checks that `workers` is a tree a level-3 node reports of itself: its chips and subs, "/chipN" and "/subN" with N
// in decimal as the node numbers them (no leading zeros, at most 10 digits), each path once. Throws
// RequestError(BAD_REQUEST) naming the first entry that is not ("[1].path: ...").
void check_level3_tree(const std::vector<WorkerStatus>& workers);
// Whether `path` is one of a level-3 node's workers as check_level3_tree takes them: "/chipN" or "/subN".
bool is_level3_worker_path(std::string_view path) noexcept;
// `text` as a JSON string literal for an error message: its first 64 bytes, then its size when it is longer.
std::string quoted_start(std::string_view text);
// {"name", "bytes", "format": "ptx"|"cubin"|"fatbin", "chips": [paths]}
nlohmann::json module_json(const ModuleInfo& m);

// `text` with each byte that is not part of valid UTF-8 replaced by U+FFFD, as append_json_string writes it: what
// goes into a protobuf string field, which the peer's parse refuses whole when one byte is not UTF-8 (a message cut
// at a byte limit inside a character, or quoting bytes a client sent).
// At most `max_bytes` of it are kept, cut before the first character that does not fit.
std::string valid_utf8(std::string_view text, std::size_t max_bytes = SIZE_MAX);

// Appends `text` to `out` as a JSON string literal, quotes included. Bytes that are not valid UTF-8 become
// U+FFFD, as nlohmann::json's dump with error_handler_t::replace writes them.
void append_json_string(std::string& out, std::string_view text);

// Required / optional typed members with errors naming `where.key`; throw RequestError(BAD_REQUEST).
// uint_member takes an integer in 0..2^64-1 (read_unsigned).
const nlohmann::json& member(const nlohmann::json& object, const char* key, const std::string& where);
std::string string_member(const nlohmann::json& object, const char* key, const std::string& where);
std::uint64_t uint_member(const nlohmann::json& object, const char* key, const std::string& where,
                          std::optional<std::uint64_t> fallback = std::nullopt);

} // namespace canopy::daemon
