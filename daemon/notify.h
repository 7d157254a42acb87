#pragma once
// systemd's notification protocol (sd_notify): READY=1 once every child is up, STOPPING=1 when a stop
// begins, WATCHDOG=1 at half the interval the unit asks for. Every call is a no-op when the daemon does
// not run under systemd (NOTIFY_SOCKET unset).
//
// Thread safety: any thread.

#include <chrono>
#include <optional>
#include <string>

namespace canopy::daemon {

void notify_ready(const std::string& status);
void notify_stopping();
void notify_status(const std::string& status);
void notify_watchdog();

// The interval at which to send WATCHDOG=1 (half of WATCHDOG_USEC), or nullopt when the unit asks for none.
std::optional<std::chrono::microseconds> watchdog_ping_interval();

// Whether stderr goes to the journal (JOURNAL_STREAM names the device and inode of stderr).
bool stderr_is_journal();

} // namespace canopy::daemon
