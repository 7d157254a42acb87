#pragma once
// Task and Graph: builders of the TASK objects of docs/control-protocol.md ("Tasks"). They produce JSON and check
// nothing the daemon checks (it refuses a bad task with BAD_REQUEST or INVALID_TENSOR naming the field); what they
// build is exactly what was asked for, in argument order.
//
//   Task t("axpy", "chip0");
//   t.input(View(x, "float32", {1024})).inout(View(y, "float32", {1024})).scalar(Scalar::float32(2.5f));
//
// Thread safety: plain values.

#include <cstdint>
#include <initializer_list>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

namespace canopy::client {

// A typed view of a buffer: {"buffer", "dtype", "shape", "strides"?, "byte_offset"?}. Empty strides are left out
// (row-major), and so is a byte_offset that was never set.
struct View {
    View(std::string buffer_id, std::string element_type, std::vector<std::uint64_t> dims)
        : buffer(std::move(buffer_id)), dtype(std::move(element_type)), shape(std::move(dims)) {}
    View& with_strides(std::vector<std::uint64_t> s) {
        strides = std::move(s);
        return *this;
    }
    View& at(std::uint64_t offset) {
        byte_offset = offset;
        return *this;
    }
    nlohmann::json to_json() const;

    std::string buffer;
    std::string dtype; // "float32", "float16", "bfloat16", "float64", "int8", "uint8", "int16", "int32", "int64"
    std::vector<std::uint64_t> shape;
    std::vector<std::uint64_t> strides;
    std::optional<std::uint64_t> byte_offset;
};

// A scalar argument: {"float32": v}, {"float64": v} or {"int64": v}.
struct Scalar {
    static Scalar float32(float v) { return Scalar{{{"float32", v}}}; }
    static Scalar float64(double v) { return Scalar{{{"float64", v}}}; }
    static Scalar int64(std::int64_t v) { return Scalar{{{"int64", v}}}; }
    nlohmann::json value;
};

class Task {
public:
    Task(std::string kernel, std::string on);
    // A TASK object as it is (a graph file's task, one built elsewhere); sent unchanged.
    static Task from_json(nlohmann::json task);

    Task& name(const std::string& name);
    Task& input(const View& view) { return tensor(view, "input"); }
    Task& output(const View& view) { return tensor(view, "output"); }
    Task& inout(const View& view) { return tensor(view, "inout"); }
    Task& scalar(const Scalar& scalar);
    // "launch": {"grid", "block", "shared_bytes"} of a module kernel, or a built-in's options ({"tf32": true}).
    Task& launch(nlohmann::json launch);
    // A module kernel's parameter kinds, one per argument ("tensor", "float32", "float64", "int64").
    Task& params(std::vector<std::string> kinds);

    const nlohmann::json& to_json() const noexcept { return json_; }

private:
    Task() = default;
    Task& tensor(const View& view, const char* tag);
    nlohmann::json json_;
};

class Graph {
public:
    Graph() = default;
    // A graph object as it is ({"tasks": [...]}); sent unchanged.
    static Graph from_json(nlohmann::json graph);

    Graph& add(const Task& task);
    const nlohmann::json& to_json() const noexcept { return json_; }

private:
    nlohmann::json json_ = {{"tasks", nlohmann::json::array()}};
};

} // namespace canopy::client
