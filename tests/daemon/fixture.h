#pragma once
// Shared helpers for supervisor tests: options for small topologies with a private state directory, and
// host access to a POSIX shm buffer from the test process.

#include "daemon/supervisor.h"
#include "ipc/mapped_region.h"
#include "ipc/sys_error.h"

#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <string>
#include <sys/mman.h>
#include <unistd.h>
#include <vector>

namespace canopy::testing {

// A fresh state directory under /tmp, removed on destruction.
struct TempDir {
    std::filesystem::path path;
    TempDir() {
        char tmpl[] = "/tmp/canopy-test-XXXXXX";
        path = ::mkdtemp(tmpl);
    }
    ~TempDir() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

inline daemon::SupervisorOptions l3_options(const std::filesystem::path& state, int sim_chips, int subs) {
    daemon::SupervisorOptions o;
    o.name = "test";
    o.path = "/";
    o.state_dir = state;
    o.backoff_initial = std::chrono::milliseconds(10);
    o.backoff_max = std::chrono::milliseconds(100);
    o.drain_timeout = std::chrono::milliseconds(2000);
    for (int i = 0; i < sim_chips; ++i) {
        o.children.push_back(
            {"chip" + std::to_string(i), daemon::ChildKind::SIM_CHIP, static_cast<std::uint32_t>(i), {}, {}});
    }
    for (int i = 0; i < subs; ++i) {
        o.children.push_back({"sub" + std::to_string(i), daemon::ChildKind::SUB, 0, {}, {}});
    }
    return o;
}

// An L4 with `subs` subs and nodes node0..node{n-1}, each an L3 of 2 sim chips and 2 subs.
inline daemon::SupervisorOptions l4_options(const std::filesystem::path& state, int nodes, int subs) {
    daemon::SupervisorOptions o = l3_options(state, 0, subs);
    o.level = 4;
    for (int n = 0; n < nodes; ++n) {
        const std::string name = "node" + std::to_string(n);
        auto nested = l3_options(state / "nodes" / name, 2, 2);
        nested.name = name;
        nested.path = "/" + name;
        o.children.push_back({name,
                              daemon::ChildKind::NODE,
                              0,
                              std::make_shared<const daemon::SupervisorOptions>(std::move(nested)),
                              {}});
    }
    return o;
}

// Maps a POSIX_SHM buffer into the test process.
inline ipc::MappedRegion map_shm(const BufferDescriptor& d) {
    const std::string path = "/" + std::string(shm_name(d));
    const int fd = ipc::sys_check(::shm_open(path.c_str(), O_RDWR | O_CLOEXEC, 0), "shm_open");
    auto region = ipc::MappedRegion::map_shared(fd, d.nbytes, true);
    ::close(fd);
    return region;
}

// The first `n` floats of a mapping.
inline std::vector<float> floats(const ipc::MappedRegion& m, std::size_t n) {
    std::vector<float> v(n);
    std::memcpy(v.data(), m.data(), n * sizeof(float));
    return v;
}

inline TensorArg arg(const BufferDescriptor& d, TensorTag tag, DataType dtype,
                     std::initializer_list<std::uint32_t> shape, std::initializer_list<std::uint32_t> strides = {},
                     std::uint64_t offset = 0) {
    return {make_tensor(d, dtype, shape, strides, offset), tag};
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

// Names of our POSIX shm objects currently in /dev/shm.
inline std::vector<std::string> our_shm_objects(const std::string& prefix) {
    std::vector<std::string> out;
    for (const auto& e : std::filesystem::directory_iterator("/dev/shm")) {
        const auto name = e.path().filename().string();
        if (name.rfind(prefix, 0) == 0) {
            out.push_back(name);
        }
    }
    return out;
}

} // namespace canopy::testing
