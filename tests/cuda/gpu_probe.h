#pragma once
// gpu_probe(): whether this machine has GPUs, found out in a forked child that loads the CUDA driver, so that the
// calling process never initializes CUDA (a process forked after its parent initialized CUDA cannot use CUDA, and
// the tests and benchmarks that include this fork supervisors, whose chips open the GPUs).
//
// Thread safety: the first call must happen while the process has a single thread; later calls read a constant.

#include "cuda/driver.h"
#include "ipc/sys_error.h"

#include <fcntl.h>
#include <string>
#include <sys/wait.h>
#include <unistd.h>

namespace canopy::testing {

// What a child process saw of the CUDA driver: the number of devices, or -1 and the driver's error.
struct GpuProbe {
    int devices = -1;
    std::string why;
};

// Probes once, in a forked child that loads the driver; the test process never touches CUDA.
// REQUIRES: the first call happens while the test process has a single thread (no supervisor alive).
inline const GpuProbe& gpu_probe() {
    static const GpuProbe probe = [] {
        int fds[2];
        ipc::sys_check(::pipe2(fds, O_CLOEXEC), "pipe2");
        const pid_t pid = ::fork();
        if (pid == 0) {
            ::close(fds[0]);
            std::string answer;
            try {
                int count = 0;
                const auto& driver = cuda::Driver::get();
                CANOPY_CU(driver, cuDeviceGetCount, &count);
                answer = std::to_string(count);
            } catch (const std::exception& e) {
                answer = std::string("-1 ") + e.what();
            }
            (void)!::write(fds[1], answer.data(), answer.size());
            ::_exit(0);
        }
        ::close(fds[1]);
        std::string text;
        char buf[512];
        for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) > 0;) {
            text.append(buf, static_cast<std::size_t>(n));
        }
        ::close(fds[0]);
        int status = 0;
        ::waitpid(pid, &status, 0);
        GpuProbe p;
        if (text.rfind("-1 ", 0) == 0 || text.empty()) {
            p.why = text.empty() ? "the probe process said nothing" : text.substr(3);
        } else {
            p.devices = std::stoi(text);
        }
        return p;
    }();
    return probe;
}

} // namespace canopy::testing
