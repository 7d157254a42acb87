#pragma once
// Small builders and readers shared by the end-to-end tests: task and graph JSON in the shape of
// docs/control-protocol.md, files for the CLI to read and write, and queries over `status`/`tasks` output.
// Plain functions without state; safe to call from any thread.

#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <sys/types.h>
#include <vector>

namespace canopy::e2e {

// Unprivileged uids the access tests run clients as (65534 is nobody); no account needs to exist for them.
constexpr uid_t OWNER_UID = 65534;
constexpr uid_t OTHER_UID = 65533;
constexpr uid_t ADMIN_UID = 65532;

// {"tensor": {"buffer", "dtype", "shape", "strides"?, "byte_offset"?}, "tag"}; empty strides are left out.
nlohmann::json tensor_arg(const std::string& buffer, const std::string& tag, const std::vector<std::uint64_t>& shape,
                          const std::vector<std::uint64_t>& strides = {}, std::uint64_t byte_offset = 0,
                          const std::string& dtype = "float32");
nlohmann::json int64_arg(std::int64_t value);
nlohmann::json float32_arg(double value);

// One graph task: {"name", "kernel", "on", "args"}. The arguments come as a vector, so that `{a}` is an array of
// one argument with every compiler (a json initialized from `{a}` is `a` itself under clang, an array under gcc).
nlohmann::json task(const std::string& name, const std::string& kernel, const std::string& on,
                    const std::vector<nlohmann::json>& args = {});
// A sleep_ms task holding `views` (tensor_arg values) for `ms` milliseconds.
nlohmann::json sleep_task(const std::string& name, const std::string& on, std::int64_t ms,
                          const std::vector<nlohmann::json>& views = {});

// Writes `text` to dir/name and returns the path.
std::string write_file(const std::filesystem::path& dir, const std::string& name, const std::string& text);
std::string read_file(const std::string& path);
// The 4-byte little-endian length prefix of a control-socket frame of `n` bytes.
std::string length_prefix(std::uint32_t n);
// `n` bytes of a fixed pseudo-random pattern (seeded), so a shifted or repeated chunk cannot compare equal.
std::string pattern_bytes(std::size_t n, std::uint32_t seed);

// The task of a `tasks`/`run` listing with that name (throws when absent).
const nlohmann::json& task_named(const nlohmann::json& listing, const std::string& name);
// The error code of a `--json` failure: `error.code` of a request failure or, when the output lists tasks,
// of the task named `task_name` (the first failed or rejected one when `task_name` is empty).
std::string error_code_of(const nlohmann::json& out, const std::string& task_name = "");
std::string error_message_of(const nlohmann::json& out, const std::string& task_name = "");

// Sum of `tasks_done` over the workers of a `status` reply.
std::uint64_t tasks_done_sum(const nlohmann::json& status);
// The worker of a `status` reply with that path ("/chip0"); throws when absent.
const nlohmann::json& worker_at(const nlohmann::json& status, const std::string& path);

// The files `cmake --install` puts under `prefix` ("" or "usr/") for the C++ client library
// (cmake/CanopyInstall.cmake), its public headers read from `source_dir`; besides these, one
// lib/cmake/canopy/canopyTargets-<config>.cmake, named by the build type, which take_config_targets takes out of a
// listing.
std::set<std::string> client_library_files(const std::filesystem::path& source_dir, const std::string& prefix);
// Removes from `installed` the files named prefix + "lib/cmake/canopy/canopyTargets-*.cmake"; returns how many.
std::size_t take_config_targets(std::set<std::string>& installed, const std::string& prefix);

// True when a line of a CLI table, split at runs of spaces, holds `cells` as consecutive cells.
bool has_row(const std::string& table, const std::vector<std::string>& cells);

// True when the closed intervals [start_ns, end_ns] of two finished tasks intersect.
bool ran_concurrently(const nlohmann::json& a, const nlohmann::json& b);

// CLOCK_MONOTONIC now, in nanoseconds: the clock of a task's start_ns and end_ns, one for every process of the host.
std::uint64_t monotonic_now_ns();

} // namespace canopy::e2e
