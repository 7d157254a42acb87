// libFuzzer target: the control socket's request path on arbitrary bytes, as one frame body goes through
// it: parse_request (daemon/request_json.cpp, the depth limit and the duplicate-key refusal of
// config/bounded_json.cpp), then the task decoder (daemon/json_codec.cpp) on the task it carries, the
// boundary where a client's JSON becomes Tensors. Any ID that parses as an identity resolves to one valid
// 4096-byte posix_shm buffer, so the fuzzer reaches the views themselves.
//
// Invariants: parse_request never throws and returns either an error or an object nested at most
// MAX_JSON_DEPTH deep whose text parses back to the same tree; parse_task either throws RequestError, or
// returns tensors that each pass validate_tensor and fit their buffer. When the fast path of run requests
// (daemon/run_request.h) takes a body, the general path parses it too, to the same "op", "id", "wait" and
// "progress", and task_from_raw gives each task exactly what parse_task gives, or the same error.
#include "config/bounded_json.h"
#include "daemon/json_codec.h"
#include "daemon/request_json.h"
#include "tests/daemon/same_task.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace {

using nlohmann::json;

canopy::BufferDescriptor resolve(const std::string& id, const std::string& where) {
    canopy::CanonicalIdentity identity{};
    try {
        identity = canopy::parse_identity(id);
    } catch (const canopy::WireError&) {
        throw canopy::daemon::RequestError(canopy::ErrorCode::UNKNOWN_BUFFER, where + ": no buffer");
    }
    return canopy::make_posix_shm_descriptor(identity, 4096, canopy::Access::READWRITE, "cnpyfuzz");
}

// The nesting depth of a tree, walked without recursion.
std::size_t depth_of(const json& root) {
    std::size_t deepest = 0;
    std::vector<std::pair<const json*, std::size_t>> todo{{&root, root.is_structured() ? 1 : 0}};
    while (!todo.empty()) {
        const auto [value, depth] = todo.back();
        todo.pop_back();
        deepest = std::max(deepest, depth);
        for (const json& child : *value) {
            if (child.is_structured()) {
                todo.emplace_back(&child, depth + 1);
            }
        }
    }
    return deepest;
}

void check_parse(const canopy::daemon::ParsedRequest& parsed) {
    if (!parsed.error.empty()) {
        if (!parsed.request.is_null()) {
            std::abort();
        }
        return;
    }
    if (!parsed.request.is_object() || depth_of(parsed.request) > canopy::config::MAX_JSON_DEPTH) {
        std::abort();
    }
    const auto again = canopy::config::parse_bounded_json(parsed.request.dump());
    if (again.refusal || again.value != parsed.request) {
        std::abort();
    }
}

void check_task(const json& task) {
    try {
        const auto parsed = canopy::daemon::parse_task(task, resolve, "task");
        for (const auto& arg : parsed.request.args.tensors) {
            canopy::validate_tensor(arg.tensor); // must not throw: parse_task ran the gate
            if (arg.tensor.byte_offset + canopy::tensor_extent_bytes(arg.tensor) > arg.tensor.buffer.nbytes) {
                std::abort();
            }
        }
    } catch (const canopy::daemon::RequestError&) {
    }
}

// The fast path's reading of a run or submit request against the general path's.
void check_fast_path(std::string_view body, canopy::daemon::RawRun& run, const json& head) {
    const auto general = canopy::config::parse_bounded_json(body);
    if (general.refusal || !general.value.is_object()) {
        std::abort();
    }
    const json& request = general.value;
    for (const char* key : {"op", "id", "wait", "progress"}) {
        if (request.contains(key) != head.contains(key) || (request.contains(key) && request[key] != head[key])) {
            std::abort();
        }
    }
    std::vector<const json*> tasks;
    if (run.single) {
        tasks.push_back(&request.at("task"));
    } else {
        for (const json& t : request.at("graph").at("tasks")) {
            tasks.push_back(&t);
        }
    }
    if (tasks.size() != run.tasks.size()) {
        std::abort();
    }
    for (std::size_t i = 0; i < tasks.size(); ++i) {
        std::optional<canopy::daemon::ParsedTask> expected;
        std::optional<canopy::daemon::ParsedTask> got;
        std::string expected_error;
        std::string got_error;
        try {
            expected = canopy::daemon::parse_task(*tasks[i], resolve, "task");
        } catch (const canopy::daemon::RequestError& e) {
            expected_error = std::string(canopy::error_code_name(e.code())) + " " + e.what();
        }
        try {
            got = canopy::daemon::task_from_raw(run.tasks[i], resolve, "task");
        } catch (const canopy::daemon::RequestError& e) {
            got_error = std::string(canopy::error_code_name(e.code())) + " " + e.what();
        }
        if (expected.has_value() != got.has_value() || expected_error != got_error ||
            (expected && !canopy::testing::same_task(*expected, *got))) {
            std::abort();
        }
    }
}

} // namespace

// A body is a request ({"op": "submit", "task": TASK} or {"op": "run", "graph": {"tasks": [TASK...]}}), or, as the
// seeds of the task decoder are, a TASK itself.
extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::string_view body(reinterpret_cast<const char*>(data), size);
    const auto parsed = canopy::daemon::parse_request(body);
    check_parse(parsed);
    if (!parsed.error.empty()) {
        return 0;
    }
    const json& request = parsed.request;
    if (parsed.run) {
        check_fast_path(body, *parsed.run, request);
    } else if (request.contains("task")) {
        check_task(request["task"]);
    } else if (request.contains("tasks") && request["tasks"].is_array()) {
        for (const json& task : request["tasks"]) {
            check_task(task);
        }
    } else {
        check_task(request);
    }
    return 0;
}
