#include "ipc/cpus.h"

#include <algorithm>
#include <cstdlib>
#include <sched.h>
#include <thread>

namespace canopy::ipc {
namespace {

SpinDecision decide() {
    const char* given = std::getenv("CANOPY_SPIN");
    const std::optional<SpinPolicy> policy = parse_spin_policy(given == nullptr ? "" : given);
    if (policy == SpinPolicy::ON || policy == SpinPolicy::OFF) {
        return {policy == SpinPolicy::ON, std::string("CANOPY_SPIN=") + given};
    }
    const unsigned cpus = usable_cpus();
    SpinDecision d{cpus >= SPARE_CPUS_FROM, std::to_string(cpus) + " usable CPUs", !policy};
    if (d.unknown_value) {
        d.why += std::string("; CANOPY_SPIN=\"") + given + "\" is not on, off or auto";
    }
    return d;
}

} // namespace

const SpinDecision& spin_decision() {
    static const SpinDecision d = decide();
    return d;
}

unsigned usable_cpus() noexcept {
    cpu_set_t set;
    CPU_ZERO(&set);
    if (::sched_getaffinity(0, sizeof set, &set) == 0) {
        return static_cast<unsigned>(CPU_COUNT(&set));
    }
    return std::max(1U, std::thread::hardware_concurrency());
}

std::optional<SpinPolicy> parse_spin_policy(std::string_view text) noexcept {
    if (text.empty() || text == "auto") {
        return SpinPolicy::AUTO;
    }
    if (text == "on") {
        return SpinPolicy::ON;
    }
    if (text == "off") {
        return SpinPolicy::OFF;
    }
    return std::nullopt;
}

bool spare_cpus() noexcept {
    try {
        return spin_decision().spin;
    } catch (...) {
        return false; // no memory for the reason: spin as little as possible
    }
}

} // namespace canopy::ipc
