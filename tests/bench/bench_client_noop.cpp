// bench_client_noop SOCKET [CALLS]: the latency of one no-op task (sleep_ms 0 on sub0) through the C++ client's
// Connection::submit_wait against an already running canopyd; prints "client_cpp_noop_task_us MEDIAN". The Python
// client's benchmark (tests/bench/bench_python.py) runs it against its own daemon, interleaved with its own
// measurement, so that the two clients are compared in the same run.
#include "bench.h"
#include "client/connection.h"

#include <cstdio>
#include <cstdlib>
#include <string>

int main(int argc, char** argv) {
    if (argc < 2) {
        std::fprintf(stderr, "usage: bench_client_noop SOCKET [CALLS]\n");
        return 2;
    }
    const int calls = argc > 2 ? std::atoi(argv[2]) : 2000;
    canopy::client::Connection connection = canopy::client::Connection::connect(argv[1]);
    const canopy::client::Task noop = canopy::client::Task::from_json(
        {{"name", "noop"}, {"kernel", "sleep_ms"}, {"on", "sub0"}, {"args", {{{"scalar", {{"int64", 0}}}}}}});
    for (int i = 0; i < calls / 4; ++i) {
        connection.submit_wait(noop);
    }
    std::vector<double> ns;
    ns.reserve(static_cast<std::size_t>(calls));
    for (int i = 0; i < calls; ++i) {
        const auto start = std::chrono::steady_clock::now();
        if (connection.submit_wait(noop).status != canopy::client::TaskStatus::COMPLETED) {
            std::fprintf(stderr, "bench_client_noop: the no-op task did not complete\n");
            return 1;
        }
        ns.push_back(static_cast<double>(
            std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start).count()));
    }
    std::sort(ns.begin(), ns.end());
    std::printf("client_cpp_noop_task_us %.1f\n", canopy::bench::detail::percentile(ns, 50) / 1e3);
    return 0;
}
