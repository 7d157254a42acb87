#pragma once
// Running a graph: one `run` request. Without waiting, the reply lists the tasks as queued; with waiting, the
// daemon replies once every task of the graph has finished, with each one's final state, however large the
// graph and however many finished tasks the daemon remembers.
//
// Progress: on a terminal the request asks for progress frames ({"done", "failed", "total"}, at most four a
// second while tasks finish); once the graph has run for Environment::progress_after a line
// "\r[12/40] done, 1 failed" is redrawn on each, and a final '\n' ends it. Nothing is drawn otherwise.
//
// Thread safety: uses the caller's Connection; one thread at a time.

#include "cli/environment.h"
#include "client/connection.h"

#include <iosfwd>
#include <nlohmann/json.hpp>
#include <string>

namespace canopy::cli {

// "completed", "failed" and "rejected" are final states.
bool is_finished(const nlohmann::json& task);
bool is_failure(const nlohmann::json& task);

// "\r[done/total] done, F failed" of a progress frame {"done", "failed", "total"}; missing counts are 0.
std::string progress_line(const nlohmann::json& progress);

// The graph's TASKSTATEs in graph order: as `run` replied, or with `wait` each in its final state. Throws what
// the Connection throws (a reply without a "tasks" array of tasks with ids is a client::ProtocolError).
nlohmann::json run_graph(client::Connection& connection, const nlohmann::json& graph, bool wait, const Environment& env,
                         std::ostream& err);

} // namespace canopy::cli
