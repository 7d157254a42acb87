#pragma once
// Helpers for process-level tests of cuda chips: topologies with cuda and sim chips, host access to POSIX shm
// buffers, and gpu_probe(), which finds out whether this machine has GPUs without initializing CUDA in the
// test process (a process forked after its parent initialized CUDA cannot use CUDA, and the supervisor's
// zygote is forked from the test process).
//
// [gpu] tests call REQUIRE_GPUS(n) first: on a machine with fewer than n GPUs (or no driver) they end through
// CANOPY_SKIP (tests/skip.h), so ctest reports them skipped there; they run in full on a GPU machine.

#include "daemon/supervisor.h"
#include "ipc/mapped_region.h"
#include "ipc/sys_error.h"
#include "tests/cuda/gpu_probe.h"
#include "tests/scoped_env.h"
#include "tests/skip.h"

#include <catch2/catch.hpp>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <optional>
#include <string>
#include <sys/mman.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

namespace canopy::testing {

#define REQUIRE_GPUS(n)                                                                                                \
    do {                                                                                                               \
        const auto& probe_ = ::canopy::testing::gpu_probe();                                                           \
        if (probe_.devices < (n)) {                                                                                    \
            CANOPY_SKIP("needs " << (n) << " GPU(s); "                                                                 \
                                 << (probe_.devices < 0 ? "no CUDA driver: " + probe_.why                              \
                                                        : std::to_string(probe_.devices) + " visible"));               \
        }                                                                                                              \
    } while (0)

// A fresh state directory under /tmp, removed on destruction.
struct TempDir {
    std::filesystem::path path;
    TempDir() {
        char tmpl[] = "/tmp/canopy-cuda-test-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

struct ChipSpec {
    daemon::ChildKind kind;
    std::uint32_t device = 0;
};

// An L3 whose children are chip0.. as listed, then sub0..; fast restarts for tests.
inline daemon::SupervisorOptions chip_options(const std::filesystem::path& state, const std::vector<ChipSpec>& chips,
                                              int subs = 0, bool fault_kernels = false) {
    daemon::SupervisorOptions o;
    o.name = "cuda-test";
    o.path = "/";
    o.state_dir = state;
    o.backoff_initial = std::chrono::milliseconds(10);
    o.backoff_max = std::chrono::milliseconds(100);
    o.drain_timeout = std::chrono::milliseconds(5000);
    o.fault_kernels = fault_kernels;
    for (std::size_t i = 0; i < chips.size(); ++i) {
        o.children.push_back({"chip" + std::to_string(i), chips[i].kind, chips[i].device, {}, {}});
    }
    for (int i = 0; i < subs; ++i) {
        o.children.push_back({"sub" + std::to_string(i), daemon::ChildKind::SUB, 0, {}, {}});
    }
    return o;
}

// Starts, in `sup`, an L3 whose chip0 is a cuda chip on device 0 and whose chip1 is a sim chip.
inline daemon::Supervisor& cuda_and_sim(TempDir& state, std::optional<daemon::Supervisor>& sup) {
    sup.emplace(chip_options(state.path, {{daemon::ChildKind::CUDA_CHIP, 0}, {daemon::ChildKind::SIM_CHIP, 0}}));
    sup->start();
    return *sup;
}

// An argument of tag `tag` over a view of `d`.
inline TensorArg view_arg(const BufferDescriptor& d, TensorTag tag, DataType dtype,
                          std::initializer_list<std::uint32_t> shape, std::initializer_list<std::uint32_t> strides = {},
                          std::uint64_t offset = 0) {
    return {make_tensor(d, dtype, shape, strides, offset), tag};
}

// An argument of tag `tag` over `n` contiguous elements of `d` from byte `offset`.
inline TensorArg vector_arg(const BufferDescriptor& d, DataType dtype, std::uint32_t n, TensorTag tag,
                            std::uint64_t offset = 0) {
    return view_arg(d, tag, dtype, {n}, {}, offset);
}

// Maps a POSIX_SHM buffer into the test process, writable.
inline ipc::MappedRegion map_shm(const BufferDescriptor& d) {
    const std::string path = "/" + std::string(shm_name(d));
    const int fd = ipc::sys_check(::shm_open(path.c_str(), O_RDWR | O_CLOEXEC, 0), "shm_open");
    auto region = ipc::MappedRegion::map_shared(fd, d.nbytes, true);
    ::close(fd);
    return region;
}

inline BufferDescriptor shm_buffer(daemon::Supervisor& sup, std::uint64_t nbytes, Access access = Access::READWRITE) {
    return sup.create_buffer({nbytes, Backend::POSIX_SHM, access, "", {}});
}

inline daemon::TaskRequest task(std::string kernel, std::string worker, std::vector<TensorArg> tensors,
                                std::vector<ScalarArg> scalars = {}) {
    daemon::TaskRequest r;
    r.kernel = std::move(kernel);
    r.worker = std::move(worker);
    r.args.tensors = std::move(tensors);
    r.args.scalars = std::move(scalars);
    return r;
}

inline std::optional<daemon::WorkerStatus> status_of(const daemon::Supervisor& sup, const std::string& path) {
    for (const auto& w : sup.status()) {
        if (w.path == path) {
            return w;
        }
    }
    return std::nullopt;
}

// Waits (polling: test set-up, not a dispatch path) until `path` is RUNNING; false after `seconds`.
inline bool wait_running(const daemon::Supervisor& sup, const std::string& path, int seconds = 30) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
        const auto w = status_of(sup, path);
        if (w && w->state == daemon::WorkerState::RUNNING && w->pid > 0) {
            return true;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
}

// Waits (polling, as above) until `path` is RUNNING under a pid other than `before`, and returns that pid;
// FAILs after 30 s.
inline pid_t wait_restarted(const daemon::Supervisor& sup, const std::string& path, pid_t before) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (std::chrono::steady_clock::now() < deadline) {
        const auto w = status_of(sup, path);
        if (w && w->state == daemon::WorkerState::RUNNING && w->pid > 0 && w->pid != before) {
            return w->pid;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    FAIL(path << " did not come back");
    return -1;
}

} // namespace canopy::testing
