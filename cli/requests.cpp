#include "cli/requests.h"

#include "cli/cli_error.h"
#include "cli/tensor_spec.h"
#include "cli/units.h"

#include <cerrno>
#include <charconv>
#include <fstream>
#include <sstream>
#include <system_error>

namespace canopy::cli {

namespace {

using nlohmann::json;

json world_list(const std::string& world) {
    json list = json::array();
    std::size_t start = 0;
    while (start <= world.size()) {
        const std::size_t comma = std::min(world.find(',', start), world.size());
        const std::string chip = world.substr(start, comma - start);
        if (chip.empty()) {
            throw usage_error("--world \"" + world + "\": expected chip paths joined by ',' (e.g. chip0,chip1)");
        }
        list.push_back(chip);
        start = comma + 1;
    }
    return list;
}

const char* tag_of(const std::string& option) {
    if (option == "--in") {
        return "input";
    }
    if (option == "--out") {
        return "output";
    }
    if (option == "--inout") {
        return "inout";
    }
    throw usage_error(option + ": not a tensor option");
}

// "X", "X,Y" or "X,Y,Z": each a positive integer.
json launch_dims(const std::string& text, const std::string& option) {
    json dims = json::array();
    std::size_t start = 0;
    while (start <= text.size() && dims.size() < 4) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        const std::string part = text.substr(start, comma - start);
        std::uint64_t v = 0;
        const auto [end, ec] = std::from_chars(part.data(), part.data() + part.size(), v);
        if (part.empty() || ec != std::errc() || end != part.data() + part.size() || v == 0 || v > UINT32_MAX) {
            throw usage_error(option + " \"" + text + "\": expected X[,Y[,Z]], positive integers");
        }
        dims.push_back(v);
        start = comma + 1;
    }
    if (dims.size() > 3) {
        throw usage_error(option + " \"" + text + "\": at most 3 dimensions");
    }
    return dims;
}

// The arguments in parameter order: "tensor" takes the next tensor option, any other kind the next --scalar.
json args_in_param_order(const std::vector<std::string>& params, const json& tensors, const json& scalars) {
    json list = json::array();
    std::size_t t = 0;
    std::size_t s = 0;
    for (const std::string& kind : params) {
        if (kind == "tensor") {
            if (t == tensors.size()) {
                throw usage_error("--param: " + std::to_string(t + 1) + " tensor parameters but only " +
                                  std::to_string(tensors.size()) + " tensor options (--in, --out, --inout)");
            }
            list.push_back(tensors[t++]);
        } else {
            if (s == scalars.size()) {
                throw usage_error("--param: " + std::to_string(s + 1) + " scalar parameters but only " +
                                  std::to_string(scalars.size()) + " --scalar options");
            }
            list.push_back(scalars[s++]);
        }
    }
    if (t != tensors.size() || s != scalars.size()) {
        throw usage_error("--param: " + std::to_string(params.size()) + " parameters for " +
                          std::to_string(tensors.size()) + " tensors and " + std::to_string(scalars.size()) +
                          " scalars; give one --param per argument");
    }
    return list;
}

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

client::BufferSpec buffer_create_spec(const BufferCreateArgs& args) {
    client::BufferSpec spec;
    spec.bytes = parse_byte_size(args.bytes, "--bytes");
    if (spec.bytes == 0) {
        throw usage_error("--bytes \"" + args.bytes + "\": a buffer has at least 1 byte");
    }
    spec.backend = args.backend;
    spec.on = args.on;
    if (!args.world.empty()) {
        if (args.backend != "symmetric") {
            throw usage_error("--world \"" + args.world + "\": only a --backend symmetric buffer has a world");
        }
        spec.world = world_list(args.world).get<std::vector<std::string>>();
    }
    spec.access = args.access;
    return spec;
}

json submit_task(const SubmitArgs& args) {
    json tensors = json::array();
    for (const auto& [option, spec] : args.tensors) {
        tensors.push_back({{"tensor", parse_tensor_spec(spec, option)}, {"tag", tag_of(option)}});
    }
    json scalars = json::array();
    for (const auto& scalar : args.scalars) {
        scalars.push_back({{"scalar", parse_scalar(scalar, "--scalar")}});
    }
    json task = {{"kernel", args.kernel}, {"on", args.on}};
    if (args.params.empty()) {
        json list = std::move(tensors);
        list.insert(list.end(), scalars.begin(), scalars.end());
        task["args"] = std::move(list);
    } else {
        task["args"] = args_in_param_order(args.params, tensors, scalars);
        task["params"] = args.params;
    }
    if (!args.grid.empty() || !args.block.empty() || !args.shared.empty() || args.tf32) {
        json launch = json::object();
        if (!args.grid.empty()) {
            launch["grid"] = launch_dims(args.grid, "--grid");
        }
        if (!args.block.empty()) {
            launch["block"] = launch_dims(args.block, "--block");
        }
        if (!args.shared.empty()) {
            launch["shared_bytes"] = parse_byte_size(args.shared, "--shared");
        }
        if (args.tf32) {
            launch["tf32"] = true;
        }
        task["launch"] = std::move(launch);
    }
    return task;
}

std::string read_file(const std::string& path, const std::string& option) {
    std::ifstream in(path, std::ios::binary);
    if (!in) {
        throw usage_error(option + " \"" + path + "\": cannot open: " + std::generic_category().message(errno));
    }
    std::ostringstream content;
    content << in.rdbuf();
    if (in.bad()) {
        throw usage_error(option + " \"" + path + "\": cannot read: " + std::generic_category().message(errno));
    }
    return std::move(content).str();
}

json load_graph_file(const std::string& path) {
    const std::string text = read_file(path, "GRAPH");
    json graph;
    try {
        graph = json::parse(text);
    } catch (const json::parse_error& e) {
        throw usage_error("GRAPH \"" + path + "\": not valid JSON: " + e.what());
    }
    if (!graph.is_object() || !graph.contains("tasks") || !graph["tasks"].is_array()) {
        throw usage_error("GRAPH \"" + path + "\": expected an object with a \"tasks\" array");
    }
    return graph;
}

std::string module_format(const std::string& path, const std::string& data, const std::string& forced) {
    if (!forced.empty()) {
        return forced;
    }
    if (ends_with(path, ".ptx")) {
        return "ptx";
    }
    if (ends_with(path, ".cubin")) {
        return "cubin";
    }
    if (ends_with(path, ".fatbin")) {
        return "fatbin";
    }
    if (data.rfind("\x7f"
                   "ELF",
                   0) == 0) {
        return "cubin";
    }
    if (data.rfind("\x50\xed\x55\xba", 0) == 0) {
        return "fatbin";
    }
    if (data.find(".version") != std::string::npos && data.find('\0') == std::string::npos) {
        return "ptx";
    }
    throw usage_error("FILE \"" + path +
                      "\": cannot tell PTX from cubin (name it .ptx, .cubin or .fatbin, or pass --format)");
}

ModuleImage module_image(const std::string& path, const std::string& forced_format) {
    ModuleImage image;
    image.data = read_file(path, "FILE");
    image.format = module_format(path, image.data, forced_format);
    return image;
}

} // namespace canopy::cli
