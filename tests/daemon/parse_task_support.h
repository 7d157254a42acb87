#pragma once
// Helpers for the tests of parse_task (daemon/json_codec.h): a resolver that knows one buffer, and the refusal
// of a task as its code and message. Header-only; test code only.

#include "daemon/json_codec.h"
#include "daemon/request_error.h"

#include <catch2/catch.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>

namespace canopy::testing {

// Resolves every buffer name to one 1 MiB posix_shm buffer.
inline BufferDescriptor one_buffer(const std::string&, const std::string&) {
    CanonicalIdentity id{};
    id.owner_instance[0] = 1;
    id.buffer_id = 1;
    id.generation = 1;
    return make_posix_shm_descriptor(id, 1 << 20, Access::READWRITE, "cnpytest");
}

// The code and message parse_task refuses `task` with; fails the test when the task was accepted.
inline std::pair<ErrorCode, std::string> task_refusal(const nlohmann::json& task) {
    try {
        (void)daemon::parse_task(task, one_buffer, "task");
    } catch (const daemon::RequestError& e) {
        return {e.code(), e.what()};
    }
    FAIL("parse_task accepted " << task.dump());
    return {};
}

// The message of parse_task's refusal of `task`, which must be BAD_REQUEST.
inline std::string bad_request_message(const nlohmann::json& task) {
    const auto [code, message] = task_refusal(task);
    CHECK(code == ErrorCode::BAD_REQUEST);
    return message;
}

} // namespace canopy::testing
