#pragma once
// How many CPUs this process may use, and whether its waits that expect work soon spin long before they block
// (CANOPY_SPIN).
//
// Thread safety: any thread. The decision is made at the first call of spare_cpus() or spin_decision() in a process
// and kept.

#include <optional>
#include <string>
#include <string_view>

namespace canopy::ipc {

// The CPUs the calling thread may run on: its affinity mask (a cpuset or systemd's CPUAffinity= narrows the
// machine), or every online CPU when the mask cannot be read.
unsigned usable_cpus() noexcept;

// What CANOPY_SPIN asks for: long spins where there are CPUs to spare (AUTO), always (ON), or never (OFF).
enum class SpinPolicy { AUTO, ON, OFF };

// The policy a value of CANOPY_SPIN names: "on", "off", "auto", or empty for auto; nullopt for any other text.
std::optional<SpinPolicy> parse_spin_policy(std::string_view text) noexcept;

// The fewest usable CPUs on which AUTO spins long. With fewer, a spinning waiter takes the CPU that the thread it
// waits for needs: on two CPUs a remote task took twice as long with the long waits on (docs/performance.md).
inline constexpr unsigned SPARE_CPUS_FROM = 4;

// Whether this process's waits that expect work soon spin long (up to about a millisecond) before they block: the
// supervisor's completion threads while a frame is in flight, and the threads that serve the gRPC completion queues
// of remote nodes. CANOPY_SPIN=on or off decides; otherwise SPARE_CPUS_FROM usable CPUs
// or more.
bool spare_cpus() noexcept;

// What spare_cpus() answers, and why, for the daemon's log.
struct SpinDecision {
    bool spin = false;
    std::string why;            // "CANOPY_SPIN=on", "2 usable CPUs; CANOPY_SPIN=\"yes\" is not on, off or auto"
    bool unknown_value = false; // CANOPY_SPIN holds a text that parse_spin_policy refuses
    // "on (16 usable CPUs)", "off (CANOPY_SPIN=off)".
    std::string summary() const { return std::string(spin ? "on" : "off") + " (" + why + ")"; }
};
const SpinDecision& spin_decision();

} // namespace canopy::ipc
