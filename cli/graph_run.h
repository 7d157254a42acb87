#pragma once
// Running a graph: one `run` request without "wait", then, when the caller waits, polling `tasks` every
// Environment::poll_interval until every task of the graph has finished. A task that has dropped out of
// the `tasks` list (it keeps the most recent 1000 finished ones) has finished; a `wait` on its id fetches
// its final state at once.
//
// Progress: once the graph has run for Environment::progress_after and stderr is a terminal, a line
// "\r[12/40] done, 1 failed" is redrawn on each poll; a final '\n' ends it. Nothing is drawn otherwise.
//
// Thread safety: uses the caller's Client; one thread at a time.

#include "cli/client.h"
#include "cli/environment.h"

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>

namespace canopy::cli {

// "completed", "failed" and "rejected" are final states.
bool is_finished(const nlohmann::json& task);
bool is_failure(const nlohmann::json& task);

// "\r[done/total] done, F failed" over TASKSTATEs; done counts finished tasks, F those that failed or were
// rejected.
std::string progress_line(const nlohmann::json& tasks);

// The graph's TASKSTATEs in graph order: as `run` replied, or with `wait` each in its final state. Throws
// what Client::call throws, and protocol_error for a reply without a "tasks" array of objects with ids.
nlohmann::json run_graph(Client& client, const nlohmann::json& graph, bool wait, const Environment& env,
                         std::ostream& err);

} // namespace canopy::cli
