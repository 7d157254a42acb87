#include "daemon/journal.h"

#include "ipc/sys_error.h"
#include "ipc/unique_fd.h"

#include <cstring>
#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

namespace canopy::daemon {

int unlink_shm(const std::string& name) noexcept {
    const std::string path = "/" + name;
    return ::shm_unlink(path.c_str()) == 0 ? 0 : errno;
}

Journal::Journal(std::filesystem::path dir) : dir_(std::move(dir)) {
    std::filesystem::create_directories(dir_);
}

void Journal::sync_dir() const {
    ipc::UniqueFd fd(ipc::sys_check(::open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC), "open(journal)"));
    ipc::sys_retry("fsync(journal)", [&] { return ::fsync(fd.get()); });
}

void Journal::record(const std::string& name) {
    const auto path = dir_ / name;
    ipc::UniqueFd fd(ipc::sys_retry("open(journal entry)",
                                    [&] { return ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600); }));
    sync_dir();
}

void Journal::erase(const std::string& name) {
    std::error_code ec;
    std::filesystem::remove(dir_ / name, ec);
}

std::vector<std::string> Journal::entries() const {
    std::vector<std::string> names;
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
        names.push_back(entry.path().filename().string());
    }
    return names;
}

RecoveryReport Journal::recover() {
    RecoveryReport report;
    for (const std::string& name : entries()) {
        const int err = unlink_shm(name);
        if (err == 0 || err == ENOENT) {
            if (err == 0) {
                report.unlinked.push_back(name);
            }
            erase(name);
        } else {
            report.failed.emplace_back(name, std::strerror(err));
        }
    }
    return report;
}

} // namespace canopy::daemon
