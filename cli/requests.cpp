#include "cli/requests.h"

#include "cli/base64.h"
#include "cli/cli_error.h"
#include "cli/tensor_spec.h"
#include "cli/units.h"

#include <cerrno>
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

bool ends_with(const std::string& s, const std::string& suffix) {
    return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

} // namespace

json buffer_create_request(const BufferCreateArgs& args) {
    const std::uint64_t bytes = parse_byte_size(args.bytes, "--bytes");
    if (bytes == 0) {
        throw usage_error("--bytes \"" + args.bytes + "\": a buffer has at least 1 byte");
    }
    json request = {{"op", "buffer.create"}, {"bytes", bytes}};
    if (!args.backend.empty()) {
        request["backend"] = args.backend;
    }
    if (!args.on.empty()) {
        request["on"] = args.on;
    }
    if (!args.world.empty()) {
        if (args.backend != "symmetric") {
            throw usage_error("--world \"" + args.world + "\": only a --backend symmetric buffer has a world");
        }
        request["world"] = world_list(args.world);
    }
    if (!args.access.empty()) {
        request["access"] = args.access;
    }
    return request;
}

json submit_request(const SubmitArgs& args) {
    json list = json::array();
    for (const auto& [option, spec] : args.tensors) {
        list.push_back({{"tensor", parse_tensor_spec(spec, option)}, {"tag", tag_of(option)}});
    }
    for (const auto& scalar : args.scalars) {
        list.push_back({{"scalar", parse_scalar(scalar, "--scalar")}});
    }
    json task = {{"kernel", args.kernel}, {"on", args.on}, {"args", std::move(list)}};
    return {{"op", "submit"}, {"task", std::move(task)}, {"wait", args.wait}};
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
    if (data.rfind("\x7f"
                   "ELF",
                   0) == 0) {
        return "cubin";
    }
    if (data.find(".version") != std::string::npos && data.find('\0') == std::string::npos) {
        return "ptx";
    }
    throw usage_error("FILE \"" + path + "\": cannot tell PTX from cubin (name it .ptx or .cubin, or pass --format)");
}

json module_load_request(const std::string& name, const std::string& path, const std::string& forced_format) {
    const std::string data = read_file(path, "FILE");
    return {{"op", "module.load"},
            {"name", name},
            {"format", module_format(path, data, forced_format)},
            {"data", base64_encode(data)}};
}

} // namespace canopy::cli
