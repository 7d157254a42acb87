// The CPUs a process may use (its affinity mask) and the values of CANOPY_SPIN.
#include "ipc/cpus.h"

#include <catch2/catch.hpp>
#include <sched.h>
#include <thread>
#include <vector>

using canopy::ipc::parse_spin_policy;
using canopy::ipc::SpinPolicy;
using canopy::ipc::usable_cpus;

namespace {

// The CPUs the calling thread may run on, by number.
std::vector<std::size_t> allowed_cpus() {
    cpu_set_t set;
    CPU_ZERO(&set);
    REQUIRE(::sched_getaffinity(0, sizeof set, &set) == 0);
    std::vector<std::size_t> cpus;
    for (std::size_t i = 0; i < CPU_SETSIZE; ++i) {
        if (CPU_ISSET(i, &set)) {
            cpus.push_back(i);
        }
    }
    return cpus;
}

} // namespace

TEST_CASE("usable_cpus counts the CPUs of the calling thread's affinity mask, not the machine's", "[daemon][cpus]") {
    const std::vector<std::size_t> allowed = allowed_cpus();
    REQUIRE(!allowed.empty());
    CHECK(usable_cpus() == allowed.size());
    // A thread narrowed to one CPU, and then to two where there are two, as a cpuset or CPUAffinity= narrows canopyd.
    unsigned one = 0;
    unsigned two = 0;
    std::thread narrowed([&] {
        cpu_set_t set;
        CPU_ZERO(&set);
        CPU_SET(allowed.front(), &set);
        if (::sched_setaffinity(0, sizeof set, &set) == 0) {
            one = usable_cpus();
        }
        if (allowed.size() >= 2) {
            CPU_SET(allowed.back(), &set);
            if (::sched_setaffinity(0, sizeof set, &set) == 0) {
                two = usable_cpus();
            }
        }
    });
    narrowed.join();
    CHECK(one == 1);
    if (allowed.size() >= 2) {
        CHECK(two == 2);
    }
    CHECK(usable_cpus() == allowed.size()); // this thread's mask is its own
}

TEST_CASE("CANOPY_SPIN is on, off, auto or empty, and nothing else", "[daemon][cpus]") {
    CHECK(parse_spin_policy("on") == SpinPolicy::ON);
    CHECK(parse_spin_policy("off") == SpinPolicy::OFF);
    CHECK(parse_spin_policy("auto") == SpinPolicy::AUTO);
    CHECK(parse_spin_policy("") == SpinPolicy::AUTO);
    for (const char* bad : {"ON", "yes", "1", "0", "true", "on ", " off", "autos", "of"}) {
        INFO(bad);
        CHECK_FALSE(parse_spin_policy(bad).has_value());
    }
}
