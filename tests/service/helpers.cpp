#include "helpers.h"

#include <algorithm>
#include <fstream>
#include <random>
#include <sstream>
#include <stdexcept>
#include <time.h>

namespace canopy::e2e {

using nlohmann::json;

json tensor_arg(const std::string& buffer, const std::string& tag, const std::vector<std::uint64_t>& shape,
                const std::vector<std::uint64_t>& strides, std::uint64_t byte_offset, const std::string& dtype) {
    json tensor = {{"buffer", buffer}, {"dtype", dtype}, {"shape", shape}};
    if (!strides.empty()) {
        tensor["strides"] = strides;
    }
    if (byte_offset != 0) {
        tensor["byte_offset"] = byte_offset;
    }
    return {{"tensor", tensor}, {"tag", tag}};
}

json int64_arg(std::int64_t value) {
    return {{"scalar", {{"int64", value}}}};
}

json float32_arg(double value) {
    return {{"scalar", {{"float32", value}}}};
}

json task(const std::string& name, const std::string& kernel, const std::string& on, const std::vector<json>& args) {
    return {{"name", name}, {"kernel", kernel}, {"on", on}, {"args", json(args)}};
}

json sleep_task(const std::string& name, const std::string& on, std::int64_t ms, const std::vector<json>& views) {
    json args = json::array();
    for (const auto& v : views) {
        args.push_back(v);
    }
    args.push_back(int64_arg(ms));
    return task(name, "sleep_ms", on, args);
}

std::string write_file(const std::filesystem::path& dir, const std::string& name, const std::string& text) {
    const auto path = (dir / name).string();
    std::ofstream out(path, std::ios::binary);
    out << text;
    if (!out) {
        throw std::runtime_error("cannot write " + path);
    }
    return path;
}

std::string read_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
}

std::string length_prefix(std::uint32_t n) {
    std::string out(4, '\0');
    for (std::size_t i = 0; i < 4; ++i) {
        out[i] = static_cast<char>((n >> (8 * i)) & 0xff);
    }
    return out;
}

std::string pattern_bytes(std::size_t n, std::uint32_t seed) {
    std::mt19937 gen(seed);
    std::string out(n, '\0');
    for (auto& c : out) {
        c = static_cast<char>(gen() & 0xff);
    }
    return out;
}

const json& task_named(const json& listing, const std::string& name) {
    for (const auto& t : listing.at("tasks")) {
        if (t.at("name") == name) {
            return t;
        }
    }
    throw std::runtime_error("no task named '" + name + "' in " + listing.dump());
}

namespace {

const json& error_of(const json& out, const std::string& task_name) {
    if (out.contains("error")) {
        return out.at("error");
    }
    if (!task_name.empty()) {
        return task_named(out, task_name).at("error");
    }
    for (const auto& t : out.at("tasks")) {
        if (t.contains("error")) {
            return t.at("error");
        }
    }
    throw std::runtime_error("no error in " + out.dump());
}

} // namespace

std::string error_code_of(const json& out, const std::string& task_name) {
    return error_of(out, task_name).at("code").get<std::string>();
}

std::string error_message_of(const json& out, const std::string& task_name) {
    return error_of(out, task_name).at("message").get<std::string>();
}

std::uint64_t tasks_done_sum(const json& status) {
    std::uint64_t sum = 0;
    for (const auto& w : status.at("workers")) {
        sum += w.at("tasks_done").get<std::uint64_t>();
    }
    return sum;
}

const json& worker_at(const json& status, const std::string& path) {
    for (const auto& w : status.at("workers")) {
        if (w.at("path") == path) {
            return w;
        }
    }
    throw std::runtime_error("no worker " + path + " in " + status.dump());
}

std::set<std::string> client_library_files(const std::filesystem::path& source_dir, const std::string& prefix) {
    std::set<std::string> files;
    for (const char* f : {"include/canopy/protocol/error.h", "include/canopy/ipc/unique_fd.h", "lib/libcanopy_client.a",
                          "lib/libcanopy_protocol.a", "lib/libcanopy_ipc.a", "lib/cmake/canopy/canopyConfig.cmake",
                          "lib/cmake/canopy/canopyConfigVersion.cmake", "lib/cmake/canopy/canopyTargets.cmake",
                          "lib/pkgconfig/canopy-client.pc"}) {
        files.insert(prefix + f);
    }
    for (const auto& header : std::filesystem::directory_iterator(source_dir / "client")) {
        if (header.path().extension() == ".h") {
            files.insert(prefix + "include/canopy/client/" + header.path().filename().string());
        }
    }
    return files;
}

std::size_t take_config_targets(std::set<std::string>& installed, const std::string& prefix) {
    const std::string stem = prefix + "lib/cmake/canopy/canopyTargets-";
    std::size_t taken = 0;
    for (auto it = installed.begin(); it != installed.end();) {
        const bool match =
            it->rfind(stem, 0) == 0 && it->size() > stem.size() + 6 && it->compare(it->size() - 6, 6, ".cmake") == 0;
        it = match ? (++taken, installed.erase(it)) : std::next(it);
    }
    return taken;
}

bool has_row(const std::string& table, const std::vector<std::string>& cells) {
    std::istringstream lines(table);
    for (std::string line; std::getline(lines, line);) {
        std::istringstream words(line);
        std::vector<std::string> row;
        for (std::string w; words >> w;) {
            row.push_back(w);
        }
        if (std::search(row.begin(), row.end(), cells.begin(), cells.end()) != row.end()) {
            return true;
        }
    }
    return false;
}

bool ran_concurrently(const json& a, const json& b) {
    const auto a_start = a.at("start_ns").get<std::uint64_t>();
    const auto a_end = a.at("end_ns").get<std::uint64_t>();
    const auto b_start = b.at("start_ns").get<std::uint64_t>();
    const auto b_end = b.at("end_ns").get<std::uint64_t>();
    return std::max(a_start, b_start) <= std::min(a_end, b_end);
}

std::uint64_t monotonic_now_ns() {
    timespec now{};
    ::clock_gettime(CLOCK_MONOTONIC, &now);
    return static_cast<std::uint64_t>(now.tv_sec) * 1'000'000'000u + static_cast<std::uint64_t>(now.tv_nsec);
}

} // namespace canopy::e2e
