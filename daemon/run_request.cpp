#include "daemon/run_request.h"

#include "protocol/module_launch.h"

#include <cmath>
#include <simdjson.h>

namespace canopy::daemon {
namespace {

namespace dom = simdjson::dom;

// A key of an object the scan reads, as a bit: a key seen twice makes the scan give up.
class Keys {
public:
    // False when `bit` was already seen.
    bool first(unsigned bit) {
        if ((seen_ & bit) != 0) {
            return false;
        }
        seen_ |= bit;
        return true;
    }
    bool has(unsigned bit) const { return (seen_ & bit) != 0; }

private:
    unsigned seen_ = 0;
};

bool read_string(dom::element e, std::string& out) {
    std::string_view text;
    if (e.get_string().get(text) != simdjson::SUCCESS) {
        return false;
    }
    out.assign(text);
    return true;
}

// An integer literal in min..max. Floats are left to the general path, which words why one is refused (and
// reads an integral float beyond 64 bits differently).
bool read_unsigned_literal(dom::element e, std::uint64_t max, std::uint64_t& out) {
    if (e.type() == dom::element_type::INT64) {
        std::int64_t v = 0;
        if (e.get_int64().get(v) != simdjson::SUCCESS || v < 0) {
            return false;
        }
        out = static_cast<std::uint64_t>(v);
    } else if (e.type() == dom::element_type::UINT64) {
        if (e.get_uint64().get(out) != simdjson::SUCCESS) {
            return false;
        }
    } else {
        return false;
    }
    return out <= max;
}

// A number as a double, as nlohmann reads it. A float of negative zero is left out: nlohmann reads the literal
// "-0" as the integer 0, whose double is +0.0.
bool read_number(dom::element e, double& out) {
    switch (e.type()) {
    case dom::element_type::INT64: {
        std::int64_t v = 0;
        if (e.get_int64().get(v) != simdjson::SUCCESS) {
            return false;
        }
        out = static_cast<double>(v);
        return true;
    }
    case dom::element_type::UINT64: {
        std::uint64_t v = 0;
        if (e.get_uint64().get(v) != simdjson::SUCCESS) {
            return false;
        }
        out = static_cast<double>(v);
        return true;
    }
    case dom::element_type::DOUBLE:
        if (e.get_double().get(out) != simdjson::SUCCESS) {
            return false;
        }
        return !(out == 0.0 && std::signbit(out));
    default:
        return false;
    }
}

bool read_dims(dom::element e, std::array<std::uint32_t, MAX_DIMS>& out, std::uint8_t& count) {
    dom::array list;
    if (e.get_array().get(list) != simdjson::SUCCESS || list.size() == 0 || list.size() > MAX_DIMS) {
        return false;
    }
    std::size_t i = 0;
    for (dom::element v : list) {
        std::uint64_t d = 0;
        if (!read_unsigned_literal(v, UINT32_MAX, d)) {
            return false;
        }
        out[i++] = static_cast<std::uint32_t>(d);
    }
    count = static_cast<std::uint8_t>(i);
    return true;
}

bool read_dtype(dom::element e, DataType& out) {
    std::string_view name;
    if (e.get_string().get(name) != simdjson::SUCCESS) {
        return false;
    }
    for (int v = 1; v <= 9; ++v) {
        if (name == to_string(static_cast<DataType>(v))) {
            out = static_cast<DataType>(v);
            return true;
        }
    }
    return false;
}

bool read_tensor(dom::element e, RawTensor& out) {
    enum : unsigned { BUFFER = 1, DTYPE = 2, SHAPE = 4, STRIDES = 8, OFFSET = 16 };
    dom::object t;
    if (e.get_object().get(t) != simdjson::SUCCESS) {
        return false;
    }
    Keys keys;
    for (dom::key_value_pair kv : t) {
        bool ok = false;
        if (kv.key == "buffer") {
            ok = keys.first(BUFFER) && read_string(kv.value, out.buffer);
        } else if (kv.key == "dtype") {
            ok = keys.first(DTYPE) && read_dtype(kv.value, out.dtype);
        } else if (kv.key == "shape") {
            ok = keys.first(SHAPE) && read_dims(kv.value, out.shape, out.ndims);
        } else if (kv.key == "strides") {
            ok = keys.first(STRIDES) && read_dims(kv.value, out.strides, out.nstrides);
            out.has_strides = true;
        } else if (kv.key == "byte_offset") {
            ok = keys.first(OFFSET) && read_unsigned_literal(kv.value, UINT64_MAX, out.byte_offset);
        }
        if (!ok) {
            return false;
        }
    }
    return keys.has(BUFFER) && keys.has(DTYPE) && keys.has(SHAPE);
}

bool read_tag(dom::element e, TensorTag& out) {
    std::string_view tag;
    if (e.get_string().get(tag) != simdjson::SUCCESS) {
        return false;
    }
    if (tag == "input") {
        out = TensorTag::INPUT;
    } else if (tag == "output") {
        out = TensorTag::OUTPUT;
    } else if (tag == "inout") {
        out = TensorTag::INOUT;
    } else {
        return false;
    }
    return true;
}

bool read_scalar(dom::element e, ScalarArg& out) {
    dom::object s;
    if (e.get_object().get(s) != simdjson::SUCCESS || s.size() != 1) {
        return false;
    }
    const dom::key_value_pair kv = *s.begin();
    if (kv.key == "int64") {
        if (kv.value.type() != dom::element_type::INT64) {
            return false; // past int64 or a float: the general path words it
        }
        std::int64_t v = 0;
        if (kv.value.get_int64().get(v) != simdjson::SUCCESS) {
            return false;
        }
        out = ScalarArg::i64(v);
        return true;
    }
    double d = 0;
    if (!read_number(kv.value, d)) {
        return false;
    }
    if (kv.key == "float64") {
        out = ScalarArg::f64(d);
        return true;
    }
    // A float32's magnitude from FLT_MAX plus half its ulp rounds to infinity: refused by the general path.
    if (kv.key == "float32" && std::fabs(d) < 0x1.ffffffp127) {
        out = ScalarArg::f32(static_cast<float>(d));
        return true;
    }
    return false;
}

bool read_arg(dom::element e, RawArg& out) {
    enum : unsigned { TENSOR = 1, TAG = 2, SCALAR = 4 };
    dom::object a;
    if (e.get_object().get(a) != simdjson::SUCCESS) {
        return false;
    }
    Keys keys;
    for (dom::key_value_pair kv : a) {
        bool ok = false;
        if (kv.key == "tensor") {
            ok = keys.first(TENSOR) && read_tensor(kv.value, out.tensor);
        } else if (kv.key == "tag") {
            ok = keys.first(TAG) && read_tag(kv.value, out.tag);
        } else if (kv.key == "scalar") {
            ok = keys.first(SCALAR) && read_scalar(kv.value, out.scalar);
        }
        if (!ok) {
            return false;
        }
    }
    out.is_tensor = keys.has(TENSOR);
    return out.is_tensor ? keys.has(TAG) && !keys.has(SCALAR) : keys.has(SCALAR) && !keys.has(TAG);
}

bool read_task(dom::element e, RawTask& out) {
    enum : unsigned { NAME = 1, KERNEL = 2, ON = 4, ARGS = 8 };
    dom::object task;
    if (e.get_object().get(task) != simdjson::SUCCESS) {
        return false;
    }
    Keys keys;
    for (dom::key_value_pair kv : task) {
        bool ok = false;
        if (kv.key == "name") {
            ok = keys.first(NAME) && read_string(kv.value, out.name);
        } else if (kv.key == "kernel") {
            ok = keys.first(KERNEL) && read_string(kv.value, out.kernel);
        } else if (kv.key == "on") {
            ok = keys.first(ON) && read_string(kv.value, out.on);
        } else if (kv.key == "args") {
            dom::array args;
            ok = keys.first(ARGS) && kv.value.get_array().get(args) == simdjson::SUCCESS;
            if (ok) {
                out.args.resize(args.size());
                std::size_t i = 0;
                std::size_t tensors = 0;
                for (dom::element a : args) {
                    RawArg& arg = out.args[i++];
                    // Tensors come before scalars for a built-in.
                    ok = ok && read_arg(a, arg) && (!arg.is_tensor || tensors == i - 1);
                    tensors += arg.is_tensor ? 1 : 0;
                }
                ok = ok && tensors <= MAX_TENSOR_ARGS && out.args.size() - tensors <= MAX_SCALAR_ARGS;
            }
        }
        if (!ok) {
            return false;
        }
    }
    out.has_name = keys.has(NAME);
    return keys.has(KERNEL) && keys.has(ON) && !is_module_kernel(out.kernel);
}

// "id" as nlohmann reads it: a literal integer >= 0 is unsigned there.
bool read_id(dom::element e, nlohmann::json& out) {
    switch (e.type()) {
    case dom::element_type::STRING: {
        std::string text;
        read_string(e, text);
        out = std::move(text);
        return true;
    }
    case dom::element_type::INT64: {
        std::int64_t v = 0;
        if (e.get_int64().get(v) != simdjson::SUCCESS) {
            return false;
        }
        out = v >= 0 ? nlohmann::json(static_cast<std::uint64_t>(v)) : nlohmann::json(v);
        return true;
    }
    case dom::element_type::UINT64: {
        std::uint64_t v = 0;
        if (e.get_uint64().get(v) != simdjson::SUCCESS) {
            return false;
        }
        out = v;
        return true;
    }
    case dom::element_type::BOOL: {
        bool v = false;
        if (e.get_bool().get(v) != simdjson::SUCCESS) {
            return false;
        }
        out = v;
        return true;
    }
    case dom::element_type::NULL_VALUE:
        out = nullptr;
        return true;
    default:
        return false; // a float's text may not survive a round trip as nlohmann writes it
    }
}

bool read_flag(dom::element e, const char* key, nlohmann::json& head) {
    bool v = false;
    if (e.get_bool().get(v) != simdjson::SUCCESS) {
        return false;
    }
    head[key] = v;
    return true;
}

bool read_graph(dom::element e, std::vector<RawTask>& out) {
    dom::object graph;
    if (e.get_object().get(graph) != simdjson::SUCCESS || graph.size() != 1) {
        return false;
    }
    const dom::key_value_pair kv = *graph.begin();
    dom::array tasks;
    if (kv.key != "tasks" || kv.value.get_array().get(tasks) != simdjson::SUCCESS || tasks.size() == 0) {
        return false;
    }
    out.resize(tasks.size());
    std::size_t i = 0;
    for (dom::element t : tasks) {
        if (!read_task(t, out[i++])) {
            return false;
        }
    }
    return true;
}

// A parser keeps the room of the largest body it read, several times that body's size; from this size on it is
// given back after the request.
constexpr std::size_t KEEP_PARSER_BYTES = std::size_t{1} << 20;

std::unique_ptr<RawRun> scan(dom::parser& parser, std::string_view body) {
    enum : unsigned { OP = 1, ID = 2, WAIT = 4, PROGRESS = 8, GRAPH = 16, TASK = 32 };
    dom::element doc;
    dom::object top;
    if (parser.parse(body.data(), body.size()).get(doc) != simdjson::SUCCESS ||
        doc.get_object().get(top) != simdjson::SUCCESS) {
        return nullptr;
    }
    auto run = std::make_unique<RawRun>();
    run->head = nlohmann::json::object();
    Keys keys;
    std::string_view op;
    for (dom::key_value_pair kv : top) {
        bool ok = false;
        if (kv.key == "op") {
            ok = keys.first(OP) && kv.value.get_string().get(op) == simdjson::SUCCESS;
        } else if (kv.key == "id") {
            ok = keys.first(ID) && read_id(kv.value, run->head["id"]);
        } else if (kv.key == "wait") {
            ok = keys.first(WAIT) && read_flag(kv.value, "wait", run->head);
        } else if (kv.key == "progress") {
            ok = keys.first(PROGRESS) && read_flag(kv.value, "progress", run->head);
        } else if (kv.key == "graph") {
            ok = keys.first(GRAPH) && read_graph(kv.value, run->tasks);
        } else if (kv.key == "task") {
            run->tasks.resize(1);
            ok = keys.first(TASK) && read_task(kv.value, run->tasks[0]);
        }
        if (!ok) {
            return nullptr;
        }
    }
    if (op == "run" && keys.has(GRAPH) && !keys.has(TASK)) {
        run->single = false;
    } else if (op == "submit" && keys.has(TASK) && !keys.has(GRAPH)) {
        run->single = true;
    } else {
        return nullptr;
    }
    run->head["op"] = std::string(op);
    return run;
}

} // namespace

std::unique_ptr<RawRun> scan_run_request(std::string_view body) {
    thread_local dom::parser parser;
    std::unique_ptr<RawRun> run = scan(parser, body);
    if (parser.capacity() > KEEP_PARSER_BYTES) {
        parser = dom::parser{};
    }
    return run;
}

} // namespace canopy::daemon
