#include "daemon/json_codec.h"

#include "config/bounded_json.h"
#include "config/config.h"
#include "daemon/json_numbers.h"
#include "daemon/request_error.h"
#include "protocol/builtin_launch.h"
#include "protocol/module_launch.h"

#include <algorithm>
#include <limits>
#include <unordered_map>

namespace canopy::daemon {
namespace {

using nlohmann::json;

DataType parse_dtype(const std::string& name, const std::string& where) {
    for (int v = 1; v <= 9; ++v) {
        const auto t = static_cast<DataType>(v);
        if (name == to_string(t)) {
            return t;
        }
    }
    bad_request(where + ": unknown dtype '" + name + "'");
}

std::vector<std::uint32_t> dims(const json& value, const std::string& where) {
    if (!value.is_array() || value.empty() || value.size() > MAX_DIMS) {
        bad_request(where + ": expected an array of 1.." + std::to_string(MAX_DIMS) + " integers");
    }
    std::vector<std::uint32_t> out;
    for (std::size_t i = 0; i < value.size(); ++i) {
        const std::uint64_t v = read_unsigned(value[i], where + "[" + std::to_string(i) + "]", 0, UINT32_MAX);
        out.push_back(static_cast<std::uint32_t>(v));
    }
    return out;
}

TensorTag parse_tag(const std::string& tag, const std::string& where) {
    if (tag == "input") {
        return TensorTag::INPUT;
    }
    if (tag == "output") {
        return TensorTag::OUTPUT;
    }
    if (tag == "inout") {
        return TensorTag::INOUT;
    }
    bad_request(where + ".tag: expected \"input\", \"output\" or \"inout\", got \"" + tag + "\"");
}

// "[2, 3]"
std::string shape_text(const std::vector<std::uint32_t>& shape) {
    std::string text = "[";
    for (std::size_t i = 0; i < shape.size(); ++i) {
        text += (i > 0 ? ", " : "") + std::to_string(shape[i]);
    }
    return text + "]";
}

// The strides of a row-major view of `shape` (a dimension of 0 counts as 1). Throws INVALID_TENSOR when one
// does not fit the 32-bit stride field. The running product is at most 2^32 - 1 before each multiply by a
// 32-bit dimension, so it never wraps.
void set_row_major_strides(const std::vector<std::uint32_t>& shape, Tensor& tensor, const std::string& where) {
    std::uint64_t stride = 1;
    for (std::size_t i = shape.size(); i-- > 0;) {
        if (stride > UINT32_MAX) {
            throw RequestError(ErrorCode::INVALID_TENSOR, where + ".shape: row-major strides of shape " +
                                                              shape_text(shape) +
                                                              " overflow 32 bits; give strides explicitly");
        }
        tensor.strides[i] = static_cast<std::uint32_t>(stride);
        stride *= std::max<std::uint32_t>(shape[i], 1);
    }
}

// The gate every tensor a client names passes; its refusal is INVALID_TENSOR naming the field.
void gate(const Tensor& tensor, const std::string& where) {
    try {
        validate_tensor(tensor);
    } catch (const WireError& e) {
        throw RequestError(ErrorCode::INVALID_TENSOR, where + "." + e.field() + ": " + e.problem());
    }
}

// Builds the Tensor field by field (no defaults hide a bad value) and runs the gate.
Tensor parse_tensor(const json& t, const BufferResolver& resolve, const std::string& where) {
    if (!t.is_object()) {
        bad_request(where + ": expected an object");
    }
    for (const auto& [key, value] : t.items()) {
        if (key != "buffer" && key != "dtype" && key != "shape" && key != "strides" && key != "byte_offset") {
            bad_request(where + ": unknown key \"" + key + "\"");
        }
    }
    Tensor tensor{};
    tensor.buffer = resolve(string_member(t, "buffer", where), where + ".buffer");
    tensor.dtype = parse_dtype(string_member(t, "dtype", where), where + ".dtype");
    const auto shape = dims(member(t, "shape", where), where + ".shape");
    tensor.ndims = static_cast<std::uint8_t>(shape.size());
    std::copy(shape.begin(), shape.end(), tensor.shapes.begin());
    if (t.contains("strides")) {
        const auto strides = dims(t["strides"], where + ".strides");
        if (strides.size() != shape.size()) {
            bad_request(where + ".strides: " + std::to_string(strides.size()) + " strides for " +
                        std::to_string(shape.size()) + " dimensions");
        }
        std::copy(strides.begin(), strides.end(), tensor.strides.begin());
    } else {
        set_row_major_strides(shape, tensor, where);
    }
    tensor.byte_offset = uint_member(t, "byte_offset", where, 0);
    gate(tensor, where);
    return tensor;
}

// A tensor argument of the fast path (daemon/run_request.h), checked as parse_tensor checks one, in its order.
Tensor tensor_from_raw(const RawTensor& raw, const BufferResolver& resolve, const std::string& where) {
    Tensor tensor{};
    tensor.buffer = resolve(raw.buffer, where + ".buffer");
    tensor.dtype = raw.dtype;
    tensor.ndims = raw.ndims;
    std::copy(raw.shape.begin(), raw.shape.begin() + raw.ndims, tensor.shapes.begin());
    if (raw.has_strides) {
        if (raw.nstrides != raw.ndims) {
            bad_request(where + ".strides: " + std::to_string(raw.nstrides) + " strides for " +
                        std::to_string(raw.ndims) + " dimensions");
        }
        std::copy(raw.strides.begin(), raw.strides.begin() + raw.nstrides, tensor.strides.begin());
    } else {
        set_row_major_strides(std::vector<std::uint32_t>(raw.shape.begin(), raw.shape.begin() + raw.ndims), tensor,
                              where);
    }
    tensor.byte_offset = raw.byte_offset;
    gate(tensor, where);
    return tensor;
}

ScalarArg parse_scalar(const json& s, const std::string& where) {
    if (!s.is_object() || s.size() != 1) {
        bad_request(where + ": expected {\"float32\": v}, {\"float64\": v} or {\"int64\": v}");
    }
    const auto first = s.begin(); // items() would be a temporary; its iterators must not outlive it
    const std::string kind = first.key();
    const json& value = first.value();
    if (kind == "int64") {
        return ScalarArg::i64(read_int64(value, where + ".int64"));
    }
    if (kind == "float32") {
        return ScalarArg::f32(read_float32(value, where + ".float32"));
    }
    if (kind == "float64") {
        return ScalarArg::f64(read_float64(value, where + ".float64"));
    }
    bad_request(where + ": unknown scalar kind \"" + kind + "\"");
}

// {"grid": [x, y, z], "block": [x, y, z], "shared_bytes": n, "tf32": b}; y and z default to 1, shared_bytes to 0,
// tf32 to false. A module kernel must give grid and block; its values are checked by validate_module_launch once
// the arguments are known. tf32 is a built-in's launch flag (protocol/builtin_launch.h), which check_builtin
// checks against the kernel and its dtype at submit.
LaunchConfig parse_launch(const json& l, const std::string& where, bool module) {
    LaunchConfig launch{{1, 1, 1}, {1, 1, 1}, 0, 0};
    if (!l.is_object()) {
        bad_request(where + ": expected an object");
    }
    for (const auto& [key, value] : l.items()) {
        if (key != "grid" && key != "block" && key != "shared_bytes" && key != "tf32") {
            bad_request(where + ": unknown key \"" + key + "\"");
        }
    }
    if (l.contains("tf32")) {
        if (module) {
            bad_request(where + ".tf32: only built-in kernels take tf32 (a module kernel chooses its own arithmetic)");
        }
        if (!l["tf32"].is_boolean()) {
            bad_request(where + ".tf32: expected true or false, got " +
                        l["tf32"].dump(-1, ' ', false, json::error_handler_t::replace));
        }
        set_builtin_launch_flags(launch, l["tf32"].get<bool>() ? BUILTIN_LAUNCH_TF32 : 0);
    }
    for (const char* key : {"grid", "block"}) {
        if (!l.contains(key)) {
            if (module) {
                bad_request(where + ": missing \"" + key + "\" (a module kernel states its launch shape)");
            }
            continue;
        }
        const json& v = l[key];
        if (!v.is_array() || v.empty() || v.size() > 3) {
            bad_request(where + "." + key + ": expected an array of 1 to 3 integers [x, y, z]");
        }
        auto* out = std::string(key) == "grid" ? launch.grid : launch.block;
        for (std::size_t i = 0; i < v.size(); ++i) {
            const std::string at = where + "." + key + "[" + std::to_string(i) + "]";
            out[i] = static_cast<std::uint32_t>(read_unsigned(v[i], at, 1, UINT32_MAX));
        }
    }
    if (l.contains("shared_bytes")) {
        launch.shared_bytes =
            static_cast<std::uint32_t>(read_unsigned(l["shared_bytes"], where + ".shared_bytes", 0, UINT32_MAX));
    }
    return launch;
}

// The kind a parameter of a module kernel declares: "tensor", or the scalar kind it takes by value.
enum class ParamKind { TENSOR, FLOAT32, FLOAT64, INT64 };

const char* param_name(ParamKind kind) {
    switch (kind) {
    case ParamKind::TENSOR:
        return "tensor";
    case ParamKind::FLOAT32:
        return "float32";
    case ParamKind::FLOAT64:
        return "float64";
    case ParamKind::INT64:
        return "int64";
    }
    return "?";
}

std::vector<ParamKind> parse_params(const json& p, const std::string& where) {
    if (!p.is_array()) {
        bad_request(where + ": expected an array of \"tensor\", \"float32\", \"float64\" or \"int64\"");
    }
    if (p.size() > MAX_MODULE_PARAMS) {
        bad_request(where + ": " + std::to_string(p.size()) + " parameters, at most " +
                    std::to_string(MAX_MODULE_PARAMS));
    }
    std::vector<ParamKind> out;
    for (std::size_t i = 0; i < p.size(); ++i) {
        const std::size_t before = out.size();
        for (ParamKind kind : {ParamKind::TENSOR, ParamKind::FLOAT32, ParamKind::FLOAT64, ParamKind::INT64}) {
            if (p[i].is_string() && p[i].get<std::string>() == param_name(kind)) {
                out.push_back(kind);
            }
        }
        if (out.size() == before) {
            bad_request(where + "[" + std::to_string(i) +
                        "]: expected \"tensor\", \"float32\", \"float64\" or \"int64\", got " + p[i].dump());
        }
    }
    return out;
}

ParamKind kind_of(const ScalarArg& s) {
    return s.kind == ScalarKind::FLOAT32   ? ParamKind::FLOAT32
           : s.kind == ScalarKind::FLOAT64 ? ParamKind::FLOAT64
                                           : ParamKind::INT64;
}

// Checks the declared parameters against the arguments, one to one in order and kind, and sets the launch's
// scalar_slots from them. `is_scalar[i]` says whether args[i] is a scalar; scalars are in argument order.
void bind_params(const std::vector<ParamKind>& params, const std::vector<bool>& is_scalar, const TaskArgs& args,
                 LaunchConfig& launch, const std::string& where) {
    if (params.size() != is_scalar.size()) {
        bad_request(where + ".params: " + std::to_string(params.size()) + " parameters for " +
                    std::to_string(is_scalar.size()) + " arguments; they match one to one");
    }
    std::size_t scalar = 0;
    launch.scalar_slots = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
        const std::string at = where + ".params[" + std::to_string(i) + "]";
        if (!is_scalar[i]) {
            if (params[i] != ParamKind::TENSOR) {
                bad_request(at + ": expected \"tensor\" for a tensor argument, got \"" + param_name(params[i]) + "\"");
            }
            continue;
        }
        const ParamKind given = kind_of(args.scalars[scalar++]);
        if (params[i] != given) {
            bad_request(at + ": expected \"" + param_name(given) + "\" for " +
                        (given == ParamKind::INT64 ? "an " : "a ") + param_name(given) + " scalar argument, got \"" +
                        param_name(params[i]) + "\"");
        }
        launch.scalar_slots |= 1u << i;
    }
}

} // namespace

const json& member(const json& object, const char* key, const std::string& where) {
    if (!object.is_object() || !object.contains(key)) {
        bad_request(where + ": missing \"" + key + "\"");
    }
    return object[key];
}

std::string string_member(const json& object, const char* key, const std::string& where) {
    const json& v = member(object, key, where);
    if (!v.is_string()) {
        bad_request(where + "." + key + ": expected a string");
    }
    return v.get<std::string>();
}

std::uint64_t uint_member(const json& object, const char* key, const std::string& where,
                          std::optional<std::uint64_t> fallback) {
    if (fallback && (!object.is_object() || !object.contains(key))) {
        return *fallback;
    }
    return read_unsigned(member(object, key, where), where + "." + key, 0, UINT64_MAX);
}

ParsedTask parse_task(const json& task, const BufferResolver& resolve, const std::string& where) {
    if (!task.is_object()) {
        bad_request(where + ": expected a task object");
    }
    for (const auto& [key, value] : task.items()) {
        if (key != "name" && key != "kernel" && key != "on" && key != "args" && key != "launch" && key != "params") {
            bad_request(where + ": unknown key \"" + key + "\"");
        }
    }
    ParsedTask out;
    out.request.kernel = string_member(task, "kernel", where);
    out.request.worker = string_member(task, "on", where);
    out.name = task.contains("name") ? string_member(task, "name", where) : out.request.kernel;
    const bool module = is_module_kernel(out.request.kernel);
    if (module) {
        try {
            validate_module_kernel_name(out.request.kernel);
        } catch (const WireError& e) {
            bad_request(where + "." + e.field() + ": " + e.problem());
        }
        if (!task.contains("params")) {
            bad_request(where + ": a module kernel (NAME:function) needs \"params\", one kind per argument");
        }
        if (!task.contains("launch")) {
            bad_request(where +
                        ": a module kernel (NAME:function) needs \"launch\": {\"grid\": [...], \"block\": [...]}");
        }
    } else if (task.contains("params")) {
        bad_request(where + ".params: only module kernels (NAME:function) declare params; '" + out.request.kernel +
                    "' is a built-in");
    }
    if (task.contains("launch")) {
        out.request.launch = parse_launch(task["launch"], where + ".launch", module);
    }
    const std::vector<ParamKind> params =
        module ? parse_params(task["params"], where + ".params") : std::vector<ParamKind>{};
    std::vector<bool> is_scalar;
    const json& args = task.contains("args") ? task["args"] : json::array();
    if (!args.is_array()) {
        bad_request(where + ".args: expected an array");
    }
    for (std::size_t i = 0; i < args.size(); ++i) {
        const std::string at = where + ".args[" + std::to_string(i) + "]";
        const json& a = args[i];
        is_scalar.push_back(a.is_object() && a.contains("scalar"));
        if (a.is_object() && a.contains("tensor")) {
            if (!module && !out.request.args.scalars.empty()) {
                bad_request(at + ": tensor arguments come before scalars");
            }
            const TensorTag tag = parse_tag(string_member(a, "tag", at), at);
            out.request.args.tensors.push_back({parse_tensor(a["tensor"], resolve, at + ".tensor"), tag});
        } else if (a.is_object() && a.contains("scalar")) {
            out.request.args.scalars.push_back(parse_scalar(a["scalar"], at + ".scalar"));
        } else {
            bad_request(at + ": expected {\"tensor\": ..., \"tag\": ...} or {\"scalar\": ...}");
        }
    }
    if (out.request.args.tensors.size() > MAX_TENSOR_ARGS || out.request.args.scalars.size() > MAX_SCALAR_ARGS) {
        bad_request(where + ".args: at most " + std::to_string(MAX_TENSOR_ARGS) + " tensors and " +
                    std::to_string(MAX_SCALAR_ARGS) + " scalars");
    }
    if (module) {
        bind_params(params, is_scalar, out.request.args, out.request.launch, where);
        try {
            validate_module_launch(out.request.launch, out.request.args.tensors.size(),
                                   out.request.args.scalars.size());
        } catch (const WireError& e) {
            bad_request(where + "." + e.field() + ": " + e.problem());
        }
    }
    return out;
}

ParsedTask task_from_raw(RawTask& raw, const BufferResolver& resolve, const std::string& where) {
    ParsedTask out;
    std::vector<TensorArg>& tensors = out.request.args.tensors;
    std::vector<ScalarArg>& scalars = out.request.args.scalars;
    for (std::size_t i = 0; i < raw.args.size(); ++i) {
        const RawArg& a = raw.args[i];
        if (a.is_tensor) {
            if (tensors.empty()) {
                tensors.reserve(raw.args.size());
            }
            tensors.push_back(
                {tensor_from_raw(a.tensor, resolve, where + ".args[" + std::to_string(i) + "].tensor"), a.tag});
        } else {
            scalars.push_back(a.scalar);
        }
    }
    // Last: `raw` keeps its strings when a tensor throws, to name the task in the rejection.
    out.request.kernel = std::move(raw.kernel);
    out.request.worker = std::move(raw.on);
    out.name = raw.has_name ? std::move(raw.name) : out.request.kernel;
    return out;
}

Access parse_access(const std::string& text) {
    if (text == "r") {
        return Access::READ;
    }
    if (text == "w") {
        return Access::WRITE;
    }
    if (text == "rw") {
        return Access::READWRITE;
    }
    bad_request("access: expected \"r\", \"w\" or \"rw\", got \"" + text + "\"");
}

std::string access_short(Access a) {
    return a == Access::READ ? "r" : a == Access::WRITE ? "w" : "rw";
}

json buffer_json(const BufferInfo& info) {
    const BufferDescriptor& d = info.descriptor;
    return {{"id", to_string(d.identity)}, {"backend", to_string(Backend{d.backend})},
            {"nbytes", d.nbytes},          {"access", access_short(d.access)},
            {"device", d.device},          {"world", info.world},
            {"name", info.name},           {"creator", info.creator}};
}

json module_json(const ModuleInfo& m) {
    return {{"name", m.name}, {"bytes", m.bytes}, {"format", to_string(m.format)}, {"chips", m.chips}};
}

json worker_json(const WorkerStatus& w) {
    return {{"path", w.path},
            {"kind", w.kind},
            {"backend", w.backend},
            {"device", w.device},
            {"pid", w.pid},
            {"state", to_string(w.state)},
            {"restarts", w.restarts},
            {"tasks_done", w.tasks_done},
            {"tasks_failed", w.tasks_failed},
            {"queued", w.queued},
            {"in_flight", w.in_flight},
            {"uptime_s", w.uptime_s},
            {"last_exit", w.last_exit}};
}

} // namespace canopy::daemon

namespace canopy::daemon {

std::string workers_to_json(const std::vector<WorkerStatus>& workers) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto& w : workers) {
        list.push_back(worker_json(w));
    }
    // A text cut at a message's byte limit can end inside a character: such bytes become U+FFFD, as in every
    // reply of the control socket, so that a tree can always be sent.
    return list.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string quoted_start(std::string_view text) {
    constexpr std::size_t SHOWN = 64;
    std::string out;
    append_json_string(out, text.substr(0, SHOWN));
    if (text.size() > SHOWN) {
        out += "... (" + std::to_string(text.size()) + " bytes)";
    }
    return out;
}

bool is_level3_worker_path(std::string_view path) noexcept {
    if (!path.starts_with('/') || !config::is_worker_name(path.substr(1))) {
        return false;
    }
    // Numbered as a node numbers its workers: a uint32 in decimal, without leading zeros.
    const std::string_view number = path.substr(path.find_first_of("0123456789"));
    return number.size() <= 10 && (number == "0" || number.front() != '0');
}

void check_level3_tree(const std::vector<WorkerStatus>& workers) {
    std::unordered_map<std::string_view, std::size_t> seen;
    for (std::size_t i = 0; i < workers.size(); ++i) {
        const std::string_view path = workers[i].path;
        const std::string where = "[" + std::to_string(i) + "].path: ";
        if (!is_level3_worker_path(path)) {
            bad_request(where + quoted_start(path) + " is not a chip or sub of a level-3 node (/chipN, /subN)");
        }
        const auto [it, inserted] = seen.emplace(path, i);
        if (!inserted) {
            bad_request(where + quoted_start(path) + " is given twice (also at [" + std::to_string(it->second) + "])");
        }
    }
}

std::vector<WorkerStatus> workers_from_json(std::string_view text) {
    const config::BoundedJson doc = config::parse_bounded_json(text, 2);
    if (doc.refusal) {
        const config::JsonRefusal& r = *doc.refusal;
        switch (r.kind) {
        case config::JsonRefusalKind::TOO_DEEP:
            bad_request(r.pointer + ": a container inside a worker (a list of workers holds objects of scalars)");
        case config::JsonRefusalKind::DUPLICATE_KEY:
            bad_request(r.pointer + ": key \"" + r.key + "\" given twice");
        case config::JsonRefusalKind::SYNTAX:
            break;
        }
        bad_request("not JSON: " + r.message);
    }
    if (!doc.value.is_array()) {
        bad_request(std::string("expected an array of workers, got ") + doc.value.type_name());
    }
    std::vector<WorkerStatus> out;
    out.reserve(doc.value.size());
    for (std::size_t i = 0; i < doc.value.size(); ++i) {
        const json& j = doc.value[i];
        const std::string where = "[" + std::to_string(i) + "]";
        if (!j.is_object()) {
            bad_request(where + ": expected a worker object, got " + j.type_name());
        }
        const auto optional = [&](const char* key) -> const json* {
            const auto it = j.find(key);
            return it == j.end() ? nullptr : &*it;
        };
        const auto optional_string = [&](const char* key) {
            return optional(key) != nullptr ? string_member(j, key, where) : std::string();
        };
        WorkerStatus w;
        w.path = string_member(j, "path", where);
        if (w.path.empty()) {
            bad_request(where + ".path: empty");
        }
        const std::string state = string_member(j, "state", where);
        bool known = false;
        for (const auto s : {WorkerState::STARTING, WorkerState::RUNNING, WorkerState::RESTARTING, WorkerState::DEAD,
                             WorkerState::STOPPED}) {
            if (state == to_string(s)) {
                w.state = s;
                known = true;
            }
        }
        if (!known) {
            bad_request(where + ".state: unknown state \"" + state + "\"");
        }
        w.kind = optional_string("kind");
        w.backend = optional_string("backend");
        w.last_exit = optional_string("last_exit");
        if (const json* v = optional("device")) {
            w.device = static_cast<std::uint32_t>(read_unsigned(*v, where + ".device", 0, UINT32_MAX));
        }
        if (const json* v = optional("pid")) {
            const std::int64_t pid = read_int64(*v, where + ".pid");
            if (pid < -1 || pid > std::numeric_limits<pid_t>::max()) {
                bad_request(where + ".pid: " + std::to_string(pid) + " is out of range -1.." +
                            std::to_string(std::numeric_limits<pid_t>::max()));
            }
            w.pid = static_cast<pid_t>(pid);
        }
        if (const json* v = optional("restarts")) {
            w.restarts = static_cast<std::uint32_t>(read_unsigned(*v, where + ".restarts", 0, UINT32_MAX));
        }
        if (const json* v = optional("tasks_done")) {
            w.tasks_done = read_unsigned(*v, where + ".tasks_done", 0, UINT64_MAX);
        }
        if (const json* v = optional("tasks_failed")) {
            w.tasks_failed = read_unsigned(*v, where + ".tasks_failed", 0, UINT64_MAX);
        }
        if (const json* v = optional("uptime_s")) {
            w.uptime_s = read_float64(*v, where + ".uptime_s");
            if (!(w.uptime_s >= 0)) {
                bad_request(where + ".uptime_s: " + v->dump() + " is negative");
            }
        }
        out.push_back(std::move(w));
    }
    return out;
}

std::string valid_utf8(std::string_view text, std::size_t max_bytes) {
    std::string out;
    if (std::all_of(text.begin(), text.end(), [](char c) { return static_cast<unsigned char>(c) < 0x80; })) {
        out = text.substr(0, max_bytes);
        return out;
    }
    // The library checks the UTF-8 and replaces what is not; its JSON text is read back.
    out = nlohmann::json::parse(
              nlohmann::json(std::string(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace))
              .get<std::string>();
    if (out.size() > max_bytes) {
        std::size_t end = max_bytes; // the first byte left out: a continuation byte belongs to a character cut
        while (end > 0 && (static_cast<unsigned char>(out[end]) & 0xC0) == 0x80) {
            --end;
        }
        out.resize(end);
    }
    return out;
}

void append_json_string(std::string& out, std::string_view text) {
    static constexpr char HEX[] = "0123456789abcdef";
    for (const char c : text) {
        if (static_cast<unsigned char>(c) >= 0x80) {
            // Rare in names and messages: the library checks the UTF-8 and escapes the whole string.
            out += nlohmann::json(std::string(text)).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
            return;
        }
    }
    out += '"';
    std::size_t run = 0; // start of the bytes not yet copied, which need no escape
    for (std::size_t i = 0; i < text.size(); ++i) {
        const char c = text[i];
        const auto u = static_cast<unsigned char>(c);
        if (c != '"' && c != '\\' && u >= 0x20) {
            continue;
        }
        out.append(text, run, i - run);
        run = i + 1;
        if (u < 0x20) {
            out += "\\u00";
            out += HEX[u >> 4];
            out += HEX[u & 0xf];
        } else {
            out += '\\';
            out += c;
        }
    }
    out.append(text, run);
    out += '"';
}

} // namespace canopy::daemon
