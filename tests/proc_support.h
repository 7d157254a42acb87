#pragma once
// Processes as /proc shows them, for tests that find and kill processes of a tree: a process's name, state
// and parent, and the children of a process by name. Header-only, standard library only.

#include <fcntl.h>
#include <filesystem>
#include <sstream>
#include <string>
#include <sys/types.h>
#include <unistd.h>
#include <vector>

namespace canopy::testing {

// Fields of /proc/PID/stat: the name (comm) and the parent pid; empty name when the process is gone.
struct ProcStat {
    std::string comm;
    char state = '?';
    pid_t ppid = -1;
};

inline ProcStat proc_stat(pid_t pid) {
    // read(2), not a stream: a process that exits between the open and the read fails the read with ESRCH,
    // which libstdc++'s filebuf turns into an exception.
    std::string text;
    const int fd = ::open(("/proc/" + std::to_string(pid) + "/stat").c_str(), O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        char buf[1024];
        const ssize_t n = ::read(fd, buf, sizeof buf);
        ::close(fd);
        if (n > 0) {
            text.assign(buf, static_cast<std::size_t>(n));
        }
    }
    ProcStat st;
    const auto lp = text.find('(');
    const auto rp = text.rfind(')');
    if (lp == std::string::npos || rp == std::string::npos) {
        return st;
    }
    st.comm = text.substr(lp + 1, rp - lp - 1);
    std::istringstream rest(text.substr(rp + 2));
    rest >> st.state >> st.ppid;
    return st;
}

// Whether `pid` is a live process (not gone, not a zombie).
inline bool alive(pid_t pid) {
    const ProcStat st = proc_stat(pid);
    return !st.comm.empty() && st.state != 'Z';
}

// The live children of `parent` named `comm`.
inline std::vector<pid_t> children_named(pid_t parent, const std::string& comm) {
    std::vector<pid_t> out;
    for (const auto& e : std::filesystem::directory_iterator("/proc")) {
        const std::string name = e.path().filename().string();
        if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) {
            continue;
        }
        const pid_t pid = std::stoi(name);
        const ProcStat st = proc_stat(pid);
        if (st.ppid == parent && st.comm == comm && st.state != 'Z') {
            out.push_back(pid);
        }
    }
    return out;
}

} // namespace canopy::testing
