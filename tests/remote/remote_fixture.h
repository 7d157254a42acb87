#pragma once
// Configs and probes for remote-node tests: a level-3 canopyd serving an L4 ("serve"), a level-4 canopyd whose
// nodes are remote, and waits on what the L4's status and the daemons' logs say. Plain functions; safe from any
// thread.

#include "tests/sanitizers.h"
#include "tests/service/fixture.h"
#include "tests/service/helpers.h"

#include <chrono>
#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace canopy::e2e {

// A TCP port on 127.0.0.1 that was free a moment ago (bound to port 0 and closed).
std::uint16_t free_tcp_port();

// "127.0.0.1:PORT".
std::string loopback(std::uint16_t port);

// How long a link or a node waits to hear from its peer before it counts it lost, where a test names no other
// time. Under the sanitizers a test's daemons share two CPUs with three other tests' and run 5 to 15 times slower,
// and a heartbeat due every quarter of it can come a second late.
inline constexpr std::int64_t DEFAULT_LOST_AFTER_MS = testing::SANITIZED ? 3000 : 1000;

// A level-3 node `name` with one sim chip and one sub that serves an L4 on `listen` with `tls` ("insecure" or
// the TLS object) and counts it lost after DEFAULT_LOST_AFTER_MS; `extra` is merged over the top level.
nlohmann::json l3_config(const std::string& name, const std::string& listen, const nlohmann::json& tls,
                         const nlohmann::json& extra = nlohmann::json::object());

// One remote node entry of an L4's nodes.
nlohmann::json remote_node(const std::string& name, const std::string& address, const nlohmann::json& tls,
                           std::int64_t lost_after_ms = DEFAULT_LOST_AFTER_MS);

// A level-4 node "rack" with one sub and `nodes`; short back-off, so that links reconnect within 200 ms.
nlohmann::json l4_config(const std::vector<nlohmann::json>& nodes,
                         const nlohmann::json& extra = nlohmann::json::object());

// Polls the daemon's status until the worker at `path` is running; false after `limit`.
bool eventually_running(const Daemon& d, const std::string& path,
                        std::chrono::milliseconds limit = std::chrono::milliseconds(20000));

// Polls the daemon's status until the last_exit of the worker at `path` holds `part`; returns the last one
// seen (which does not hold it after `limit`).
std::string eventually_last_exit(const Daemon& d, const std::string& path, const std::string& part,
                                 std::chrono::milliseconds limit = std::chrono::milliseconds(10000));

// The state of task `id` in the daemon's `tasks` listing ("queued", "running", ...); "" when it is not listed.
std::string task_state(const Daemon& d, std::uint64_t id);

// Polls `tasks` until the task with id `id` has left the queue; false after `limit`.
bool eventually_started(const Daemon& d, std::uint64_t id,
                        std::chrono::milliseconds limit = std::chrono::milliseconds(10000));

// Calls `holds` every 10 ms until it returns true; false after `limit`.
bool eventually(const std::function<bool()>& holds, std::chrono::milliseconds limit = std::chrono::milliseconds(10000));

// Whether one line of the daemon's log holds every one of `parts`.
bool has_log_line(const Daemon& d, const std::vector<std::string>& parts);
// Polls until one line of the daemon's log holds every one of `parts`; false after 10 s.
bool eventually_logged(const Daemon& d, const std::vector<std::string>& parts);
// How many lines of the daemon's log hold every one of `parts`.
std::size_t count_log_lines(const Daemon& d, const std::vector<std::string>& parts);

} // namespace canopy::e2e
