#pragma once
// The requests of docs/control-protocol.md built from command-line arguments. Only what the command line
// names goes into a request; everything left out takes the daemon's default.
//
// Every builder throws usage_error naming the bad argument; none touches the network.
//
// Thread safety: pure functions (module_load_request and load_graph_file read a file).

#include "client/types.h"

#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

namespace canopy::cli {

// `canopy buffer create`; an empty field was not given.
struct BufferCreateArgs {
    std::string bytes;   // required; parse_byte_size
    std::string backend; // "shm" | "vmm" | "symmetric"
    std::string on;      // worker path
    std::string world;   // "chip0,chip1"; only with backend "symmetric"
    std::string access;  // "r" | "w" | "rw"
};

// What `buffer.create` is asked for: only the arguments given.
client::BufferSpec buffer_create_spec(const BufferCreateArgs& args);

// One tensor argument as given: the option ("--in", "--out", "--inout") and its SPEC.
using TensorOption = std::pair<std::string, std::string>;

// `canopy submit`.
struct SubmitArgs {
    std::string kernel;
    std::string on;
    std::vector<TensorOption> tensors; // in command-line order across --in/--out/--inout
    std::vector<std::string> scalars;  // "TYPE:VALUE", in command-line order
    bool wait = false;
    // Module kernels (NAME:function, docs/modules.md): one kind per parameter ("tensor", "float32", "float64",
    // "int64"), which also orders the arguments; the launch shape "X[,Y[,Z]]" and dynamic shared bytes.
    std::vector<std::string> params;
    std::string grid;
    std::string block;
    std::string shared;
    // Built-ins: "launch": {"tf32": true}, TF32 allowed for a float32 matmul (docs/kernels.md).
    bool tf32 = false;
};

// The TASK of `submit`: {"kernel", "on", "args": [tensors..., scalars...]}. With --param the args follow the
// parameters instead (the i-th "tensor" parameter takes the i-th tensor option, any other kind the next --scalar)
// and the task carries "params"; with --grid/--block/--shared or --tf32 it carries "launch".
nlohmann::json submit_task(const SubmitArgs& args);

// The graph of GRAPH.json: a JSON object with a "tasks" array. Throws usage_error naming the file when
// it cannot be read, is not JSON or has no "tasks" array.
nlohmann::json load_graph_file(const std::string& path);

// "ptx", "cubin" or "fatbin": `forced` when given, else by extension (.ptx, .cubin, .fatbin), else by content
// (an ELF image is a cubin; one starting with the fatbin magic a fatbin; text with a ".version" directive is
// PTX). Throws usage_error when neither tells. The daemon classifies the bytes again and refuses a mismatch.
std::string module_format(const std::string& path, const std::string& data, const std::string& forced);

// A module image to load: FILE's bytes and their format (module_format). Throws usage_error when FILE cannot be
// read.
struct ModuleImage {
    std::string data;
    std::string format;
};
ModuleImage module_image(const std::string& path, const std::string& forced_format);

// The whole content of a file; throws usage_error naming `option` and the path with the errno text.
std::string read_file(const std::string& path, const std::string& option);

} // namespace canopy::cli
