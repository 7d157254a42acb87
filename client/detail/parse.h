#pragma once
// Reading the reply objects of docs/control-protocol.md into the values of client/types.h.
//
// A value's identity is required (a task's unsigned "id", a buffer's "id" string); a missing or mistyped one is a
// ProtocolError ("the reply to \"wait\" lists a task without an id"). Every other field is read when it has the
// documented type and left at its default otherwise, so that a newer daemon's reply still reads; the whole object
// is kept in the value's `json`.
//
// Thread safety: pure functions.

#include "client/types.h"

#include <string_view>

namespace canopy::client::detail {

// reply[key] when it is an object, else a ProtocolError "the reply to \"OP\" has no \"KEY\" object".
const nlohmann::json& object_member(const nlohmann::json& reply, const char* key, std::string_view op);
// reply[key] when it is an array, else a ProtocolError "the reply to \"OP\" has no \"KEY\" array".
const nlohmann::json& array_member(const nlohmann::json& reply, const char* key, std::string_view op);

TaskState parse_task(const nlohmann::json& task, std::string_view op);
std::vector<TaskState> parse_tasks(const nlohmann::json& reply, std::string_view op);
BufferInfo parse_buffer(const nlohmann::json& buffer, std::string_view op);
Status parse_status(const nlohmann::json& reply);
ModuleInfo parse_module(const nlohmann::json& module);

} // namespace canopy::client::detail
