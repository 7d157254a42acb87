#pragma once
// Journal: the record of every named shared-memory object a supervisor creates, kept under its state
// directory so that a start after a crash can unlink what the previous incarnation left behind.
//
// The journal is a directory with one empty file per live object, named after the object. An entry is
// written (and the directory synced) before the object is created, and removed after the object is
// unlinked; an object whose unlink fails keeps its entry for the next retry.
//
// Thread safety: none; the buffer registry serializes calls.

#include <filesystem>
#include <string>
#include <vector>

namespace canopy::daemon {

struct RecoveryReport {
    std::vector<std::string> unlinked; // objects a previous incarnation left and that are now gone
    std::vector<std::pair<std::string, std::string>> failed; // name, reason: entry kept
};

class Journal {
public:
    // Creates the directory (and parents) if needed. Throws ipc::SysError / filesystem_error.
    explicit Journal(std::filesystem::path dir);

    // Records `name` durably. Throws on failure (then the object must not be created).
    void record(const std::string& name);
    // Forgets `name` (after a successful unlink).
    void erase(const std::string& name);
    // Every name the journal lists.
    std::vector<std::string> entries() const;

    // Unlinks every POSIX shm object the journal lists; ENOENT counts as done.
    RecoveryReport recover();

    const std::filesystem::path& dir() const noexcept { return dir_; }

private:
    void sync_dir() const;

    std::filesystem::path dir_;
};

// shm_unlink("/" + name); returns 0 or the errno (ENOENT included).
int unlink_shm(const std::string& name) noexcept;

} // namespace canopy::daemon
