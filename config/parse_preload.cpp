// The "preload" section: arenas mapped before the zygote fork.

#include "config/config_error.h"
#include "config/detail/sections.h"
#include "config/detail/values.h"

#include <array>
#include <map>
#include <string>

namespace canopy::config::detail {
namespace {

constexpr std::array<std::string_view, 2> PRELOAD_BACKEND_NAMES = {"fork_cow", "fork_shm"};
constexpr std::array<PreloadBackend, 2> PRELOAD_BACKENDS = {PreloadBackend::FORK_COW, PreloadBackend::FORK_SHM};

// FORK_COW maps a whole file: `path` is required and `bytes` is the file's size, never given.
void parse_fork_cow(const ObjectReader& object, PreloadConfig& preload) {
    if (const auto bytes = object.find("bytes")) {
        bytes->fail("\"bytes\" is not allowed with backend \"fork_cow\" (the file's size is used), got " +
                    quote_value(bytes->value()));
    }
    if (!object.find("path")) {
        throw ConfigError(object.pointer_of("path"),
                          "missing required key \"path\" (backend \"fork_cow\" maps a file)");
    }
    preload.path = read_absolute_path(object.require("path"));
}

// FORK_SHM maps `bytes` shared bytes, optionally filled from `path`.
void parse_fork_shm(const ObjectReader& object, PreloadConfig& preload) {
    if (!object.find("bytes")) {
        throw ConfigError(object.pointer_of("bytes"),
                          "missing required key \"bytes\" (backend \"fork_shm\" needs a size)");
    }
    preload.bytes =
        static_cast<std::uint64_t>(object.require("bytes").integer(1, static_cast<std::int64_t>(MAX_PRELOAD_BYTES)));
    if (const auto path = object.find("path")) {
        preload.path = read_absolute_path(*path);
    }
}

PreloadConfig parse_preload(const Field& field) {
    const ObjectReader object(field, {"name", "path", "bytes", "backend"});
    PreloadConfig preload;
    preload.name = read_name(object.require("name"));
    preload.backend = PRELOAD_BACKENDS[object.require("backend").choice(PRELOAD_BACKEND_NAMES)];
    if (preload.backend == PreloadBackend::FORK_COW) {
        parse_fork_cow(object, preload);
    } else {
        parse_fork_shm(object, preload);
    }
    return preload;
}

} // namespace

std::vector<PreloadConfig> parse_preloads(const Field& field) {
    std::vector<PreloadConfig> preloads;
    std::map<std::string, std::string> seen;
    for (const Field& element : field.elements()) {
        PreloadConfig preload = parse_preload(element);
        const std::string name_pointer = element.pointer() + "/name";
        const auto [it, inserted] = seen.emplace(preload.name, name_pointer);
        if (!inserted) {
            throw ConfigError(name_pointer,
                              "duplicate preload name \"" + preload.name + "\" (also at " + it->second + ")");
        }
        preloads.push_back(std::move(preload));
    }
    return preloads;
}

} // namespace canopy::config::detail
