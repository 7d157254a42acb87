#include "daemon/notify.h"

#include <cstdio>
#include <cstdlib>
#include <sys/stat.h>
#include <systemd/sd-daemon.h>

namespace canopy::daemon {

void notify_ready(const std::string& status) {
    sd_notifyf(0, "READY=1\nSTATUS=%s", status.c_str());
}

void notify_stopping() {
    sd_notify(0, "STOPPING=1\nSTATUS=stopping");
}

void notify_status(const std::string& status) {
    sd_notifyf(0, "STATUS=%s", status.c_str());
}

void notify_watchdog() {
    sd_notify(0, "WATCHDOG=1");
}

std::optional<std::chrono::microseconds> watchdog_ping_interval() {
    std::uint64_t usec = 0;
    if (sd_watchdog_enabled(0, &usec) <= 0 || usec == 0) {
        return std::nullopt;
    }
    return std::chrono::microseconds(usec / 2);
}

bool stderr_is_journal() {
    const char* stream = std::getenv("JOURNAL_STREAM");
    if (stream == nullptr) {
        return false;
    }
    unsigned long long dev = 0;
    unsigned long long ino = 0;
    if (std::sscanf(stream, "%llu:%llu", &dev, &ino) != 2) {
        return false;
    }
    struct stat st {};
    return ::fstat(2, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

} // namespace canopy::daemon
