#pragma once
// The fast path of the control protocol's `run` and `submit` requests: scan_run_request reads the body of such a
// request with simdjson, straight into the task fields, without building a JSON tree. A graph of 10 000 tasks
// is most of a megabyte of JSON, and a tree of it costs an allocation per value both to build and to free.
//
// The scan takes only the plain form that clients write: the keys listed below, each once, each of the type
// it must have, built-in kernels without "launch" or "params". For anything else, a mistake included, it
// returns nothing and the request goes the general way (parse_request, then parse_task), which is the one
// that words every error. So an accepted body is one parse_task accepts syntactically too, and the fields
// are the same as parse_task reads from it (tests/daemon/test_run_request.cpp and the fuzz target
// fuzz_run_request compare the two). What the scan leaves to task_from_raw (daemon/json_codec.h) are the
// checks that need the daemon: the buffer's identity and the gate (validate_tensor), in the order
// parse_task makes them.
//
//   request  {"op": "run", "graph": {"tasks": [TASK, ...]}, "id"?, "wait"?, "progress"?}
//            {"op": "submit", "task": TASK, "id"?, "wait"?, "progress"?}
//            "id" a string, an integer, true/false or null; "wait" and "progress" true or false
//   TASK     {"kernel": s, "on": s, "name"?: s, "args"?: [ARG, ...]}, kernel a built-in
//   ARG      {"tensor": TENSOR, "tag": "input"|"output"|"inout"} | {"scalar": {"int64"|"float32"|"float64": n}}
//            tensors before scalars, at most MAX_TENSOR_ARGS and MAX_SCALAR_ARGS
//   TENSOR   {"buffer": s, "dtype": s, "shape": [u32, ...], "strides"?: [u32, ...], "byte_offset"?: u64}
//
// Thread safety: scan_run_request keeps one simdjson parser per thread.

#include "protocol/task_args.h"

#include <array>
#include <cstdint>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

namespace canopy::daemon {

// A tensor argument as written, before its buffer is resolved and the gate runs.
struct RawTensor {
    std::string buffer;
    DataType dtype = DataType::FLOAT32;
    std::uint8_t ndims = 0;
    std::array<std::uint32_t, MAX_DIMS> shape{};
    bool has_strides = false;
    std::uint8_t nstrides = 0; // may differ from ndims: task_from_raw words that error
    std::array<std::uint32_t, MAX_DIMS> strides{};
    std::uint64_t byte_offset = 0;
};

struct RawArg {
    bool is_tensor = false;
    RawTensor tensor; // is_tensor
    TensorTag tag = TensorTag::INPUT;
    ScalarArg scalar{}; // !is_tensor
};

struct RawTask {
    std::string name; // empty unless has_name
    bool has_name = false;
    std::string kernel;
    std::string on;
    std::vector<RawArg> args;
};

struct RawRun {
    bool single = false;        // "submit": one task
    std::vector<RawTask> tasks; // in the request's order
    nlohmann::json head;        // {"op", and "id", "wait", "progress" where given}: what handlers read
};

// The request in `body`, when it is a run or submit request of the plain form above; nullptr otherwise.
// Never throws for bad input; throws std::bad_alloc only.
std::unique_ptr<RawRun> scan_run_request(std::string_view body);

} // namespace canopy::daemon
