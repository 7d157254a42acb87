#pragma once
// Whether two decodings of a task are the same: the fast path of run requests (daemon/run_request.h with
// task_from_raw) against parse_task on the same JSON. Shared by test_run_request.cpp and fuzz_control_request.

#include "daemon/json_codec.h"

#include <cstring>

namespace canopy::testing {

inline bool same_task(const daemon::ParsedTask& a, const daemon::ParsedTask& b) {
    return a.name == b.name && a.request.kernel == b.request.kernel && a.request.worker == b.request.worker &&
           a.request.args == b.request.args &&
           std::memcmp(&a.request.launch, &b.request.launch, sizeof a.request.launch) == 0 &&
           a.request.after == b.request.after && a.request.keep_failure == b.request.keep_failure;
}

} // namespace canopy::testing
