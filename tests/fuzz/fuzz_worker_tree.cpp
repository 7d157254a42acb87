// libFuzzer target: the worker tree a supervisor reads from the level below (daemon/json_codec.h), on arbitrary
// bytes: an L4's link reads it from a remote host's status events, and every supervisor from its nested nodes.
//
// Invariants: workers_from_json either throws RequestError(BAD_REQUEST) or returns workers each with a non-empty
// path, a pid of at least -1 and a finite uptime of at least 0; what it returns is written by workers_to_json into
// text that reads back to the same workers; and workers_to_json writes a worker whose texts are the input's bytes,
// UTF-8 or not, into text that reads back. check_level3_tree either throws RequestError(BAD_REQUEST) or accepts a
// tree whose paths are each /chipN or /subN, none twice.
#include "daemon/json_codec.h"
#include "daemon/request_error.h"

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <set>
#include <string_view>

namespace {

bool same(const canopy::daemon::WorkerStatus& a, const canopy::daemon::WorkerStatus& b) {
    return a.path == b.path && a.kind == b.kind && a.backend == b.backend && a.device == b.device && a.pid == b.pid &&
           a.state == b.state && a.restarts == b.restarts && a.tasks_done == b.tasks_done &&
           a.tasks_failed == b.tasks_failed && a.uptime_s == b.uptime_s && a.last_exit == b.last_exit;
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace canopy::daemon;
    // The input as a worker's texts, as a last exit cut at a message's byte limit can be: the tree is written
    // whatever the bytes, and reads back.
    WorkerStatus raw;
    raw.path = "/chip0";
    raw.last_exit.assign(reinterpret_cast<const char*>(data), size);
    raw.kind = raw.last_exit.substr(0, 8);
    if (workers_from_json(workers_to_json({raw})).size() != 1) {
        std::abort();
    }
    std::vector<WorkerStatus> workers;
    try {
        workers = workers_from_json(std::string_view(reinterpret_cast<const char*>(data), size));
    } catch (const RequestError& e) {
        if (e.code() != canopy::ErrorCode::BAD_REQUEST) {
            std::abort();
        }
        return 0;
    }
    for (const WorkerStatus& w : workers) {
        if (w.path.empty() || w.pid < -1 || !std::isfinite(w.uptime_s) || w.uptime_s < 0) {
            std::abort();
        }
    }
    const std::vector<WorkerStatus> back = workers_from_json(workers_to_json(workers));
    if (back.size() != workers.size()) {
        std::abort();
    }
    for (std::size_t i = 0; i < back.size(); ++i) {
        if (!same(back[i], workers[i])) {
            std::abort();
        }
    }
    // What an L4's link checks next of a remote host's tree: accepted, every path is /chipN or /subN and none twice.
    try {
        check_level3_tree(workers);
    } catch (const RequestError& e) {
        if (e.code() != canopy::ErrorCode::BAD_REQUEST) {
            std::abort();
        }
        return 0;
    }
    std::set<std::string_view> paths;
    for (const WorkerStatus& w : workers) {
        const std::string_view path = w.path;
        const std::string_view number = path.starts_with("/chip")  ? path.substr(5)
                                        : path.starts_with("/sub") ? path.substr(4)
                                                                   : std::string_view();
        if (number.empty() || number.find_first_not_of("0123456789") != std::string_view::npos ||
            !paths.insert(path).second) {
            std::abort();
        }
    }
    return 0;
}
