#pragma once
// A model-based soak: several clients drive one daemon at once with random sequences of requests over buffers of
// their own (posix_shm and sim_vmm creations; writes and reads as base64 and as attachments; fd hand-overs whose
// mappings are read and written; fills and copies on every worker, alone and in graphs; sleeps that hold views;
// cancels, also of a sleep that a fill in its graph depends on, and of a sleep that covers another task's view with
// the buffer's release or a write queued behind it; releases), valid and invalid, without waiting for their tasks. Each
// client keeps a byte model of its buffers and applies every request the daemon accepts in the order it sent them,
// which is the order the daemon promises (docs/control-protocol.md: tasks and transfers over the same bytes run in
// submission order, a release after the tasks before it; a graph's tasks in graph order). Every read must equal the
// model, every accepted task must complete (or fail with the code its cancelled dependency earns it), every refusal
// must carry the code the request earns, a graph with one bad task must run none, and the daemon must end whole, with
// nothing failed that should not have.

#include "fixture.h"
#include "helpers.h"

#include <cstddef>
#include <string>
#include <vector>

namespace canopy::e2e {

// A worker a soak's tasks run on: its path as tasks name it, its chip backend ("sim" or "cuda"; "" for a sub) and
// its host ("" for the daemon's own, else the remote node whose host it is on). A chip reaches the device memory
// of every chip of its backend on its host; a sub reaches none.
struct SoakWorker {
    std::string path;
    std::string chip;
    std::string host;
};

struct SoakTopology {
    std::vector<SoakWorker> workers;
    std::vector<std::string> hosts; // where buffers are made: "" (the daemon's host) and remote nodes' names
};

// Runs four soak clients on `d` at once for `steps` steps each, then checks (with Catch2, on the calling thread)
// each one's tasks and buffers, that no worker of the tree died, and that nothing was logged at warning or above
// meanwhile. CANOPY_SOAK_SEED=N starts the clients' seeds at N instead of 1000.
void soak(const Daemon& d, const SoakTopology& topology, std::size_t steps);

} // namespace canopy::e2e
