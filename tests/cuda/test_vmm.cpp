// CUDA virtual memory in this process: an allocation exported as an fd and imported again maps the same memory;
// the peer kernels refuse, on the device, a rank outside the world and touch nothing for it. [gpu] tests skip
// (WARN) where no driver or device is present.
//
// This executable initializes CUDA in its own process; it must never fork a process that uses CUDA.
#include "cuda/context.h"
#include "cuda/memory.h"
#include "cuda/module.h"
#include "cuda/stream.h"
#include "cuda/vmm.h"
#include "tests/cuda/gpu_context.h"
#include "worker/cuda/fatbin.h"
#include "worker/cuda/launcher.h"
#include "worker/kernels/builtin.h"

#include <catch2/catch.hpp>
#include <cstring>
#include <optional>
#include <unistd.h>
#include <vector>

using namespace canopy;
using namespace canopy::cuda;

namespace {

BufferDescriptor vmm_descriptor(std::uint64_t nbytes, std::uint64_t id) {
    CanonicalIdentity identity{};
    identity.owner_instance = draw_owner_instance();
    identity.buffer_id = id;
    identity.generation = 1;
    return make_vmm_descriptor(Backend::CUDA_VMM, identity, nbytes, Access::READWRITE, 0);
}

// A device allocation of `bytes` mapped read-write for device 0.
struct Mapped {
    VmmAllocation allocation;
    VmmMapping mapping;
    Mapped(const Driver& d, std::size_t bytes)
        : allocation(VmmAllocation::create(d, 0, bytes)), mapping(d, allocation, bytes, 0, true) {}
};

void upload(const Driver& d, CuDevicePtr at, const std::vector<float>& values) {
    CANOPY_CU(d, cuMemcpyHtoD, at, values.data(), values.size() * sizeof(float));
}

std::vector<float> download(const Driver& d, CuDevicePtr at, std::size_t count) {
    std::vector<float> out(count);
    CANOPY_CU(d, cuMemcpyDtoH, out.data(), at, count * sizeof(float));
    return out;
}

} // namespace

TEST_CASE("a VMM allocation exported as an fd and imported maps the same memory", "[cuda][gpu][vmm]") {
    REQUIRE_GPU(g);
    const Driver& d = *g->driver;
    const std::size_t granularity = vmm_granularity(d, 0);
    REQUIRE(granularity > 0);
    CHECK(vmm_padded_size(d, 0, 1) == granularity);
    CHECK(vmm_padded_size(d, 0, granularity) == granularity);
    CHECK(vmm_padded_size(d, 0, granularity + 1) == 2 * granularity);
    const std::size_t bytes = vmm_padded_size(d, 0, 3 << 20);
    Mapped original(d, bytes);
    CHECK(original.allocation.device() == 0);
    const int fd = original.allocation.export_fd();
    REQUIRE(fd >= 0);
    VmmAllocation imported = VmmAllocation::import_fd(d, fd);
    ::close(fd); // the import holds its own reference
    CHECK(imported.device() == 0);
    VmmMapping second(d, imported, bytes, 0, true);
    CHECK(second.address() != original.mapping.address());
    std::vector<float> values(1024);
    for (std::size_t i = 0; i < values.size(); ++i) {
        values[i] = static_cast<float>(i) * 0.5f;
    }
    upload(d, original.mapping.address() + bytes - 4096, values);
    CHECK(download(d, second.address() + bytes - 4096, values.size()) == values);
    // A read-only grant is read-only where the driver supports it, read-write otherwise.
    VmmMapping read_only(d, imported, bytes, 0, false);
    CHECK(download(d, read_only.address() + bytes - 4096, values.size()) == values);
    INFO("read-only device mappings supported: " << read_only.read_only());
}

TEST_CASE("peer kernels on the device: the table is followed, a rank outside the world touches nothing",
          "[cuda][gpu][vmm]") {
    REQUIRE_GPU(g);
    const Driver& d = *g->driver;
    Stream stream(d);
    Module module(d, worker::kernel_image());
    worker::Launcher launcher(d, module);
    const std::size_t bytes = vmm_padded_size(d, 0, 4096);
    Mapped rank0(d, bytes);
    Mapped rank1(d, bytes);
    upload(d, rank0.mapping.address(), std::vector<float>(256, 1.0f));
    upload(d, rank1.mapping.address(), std::vector<float>(256, 2.0f));
    const std::vector<std::uint64_t> bases{rank0.mapping.address(), rank1.mapping.address()};
    DeviceAllocation table(d, sizeof(std::uint64_t) * 2);
    table.copy_from_host(bases.data(), sizeof(std::uint64_t) * 2);
    DeviceAllocation out(d, 512 * sizeof(float));
    const std::vector<float> marker(512, -1.0f);

    const auto symmetric = vmm_descriptor(bytes, 1);
    const auto plain = vmm_descriptor(bytes, 2);
    const Tensor s = make_tensor(symmetric, DataType::FLOAT32, {256});
    const Tensor s_strided = make_tensor(symmetric, DataType::FLOAT32, {128}, {2}, 4);
    const Tensor o256 = make_tensor(plain, DataType::FLOAT32, {256});
    const Tensor o512 = make_tensor(plain, DataType::FLOAT32, {512});
    auto run = [&](std::string_view name, const Tensor& src, const Tensor& dst, std::vector<ScalarArg> scalars,
                   std::uint32_t world) {
        out.copy_from_host(marker.data(), marker.size() * sizeof(float));
        const std::vector<kernels::BoundTensor> bound{{&src, TensorTag::INPUT, nullptr},
                                                      {&dst, TensorTag::OUTPUT, nullptr}};
        const std::vector<std::uint64_t> device_bases{bases[0], out.get()};
        const kernels::KernelCall call{name, bound, scalars, nullptr};
        launcher.launch_peer(call, device_bases, table.get(), world, stream.get());
        stream.synchronize();
        return launcher.peer_error();
    };

    SECTION("peer_read follows the table to rank pe") {
        CHECK_FALSE(run("peer_read", s, o256, {ScalarArg::i64(1)}, 2));
        CHECK(download(d, out.get(), 256) == std::vector<float>(256, 2.0f));
        CHECK_FALSE(run("peer_read", s, o256, {ScalarArg::i64(0)}, 2));
        CHECK(download(d, out.get(), 256) == std::vector<float>(256, 1.0f));
    }
    SECTION("peer_read with pe equal to the world, 99 or negative raises the flag and writes nothing") {
        for (const std::int64_t pe : {std::int64_t{2}, std::int64_t{99}, std::int64_t{-1}, std::int64_t{1} << 40}) {
            INFO("pe " << pe);
            CHECK(run("peer_read", s, o256, {ScalarArg::i64(pe)}, 2));
            CHECK(download(d, out.get(), 512) == marker);
        }
        // The flag is cleared by the next launch.
        CHECK_FALSE(run("peer_read", s, o256, {ScalarArg::i64(1)}, 2));
    }
    SECTION("allgather concatenates every rank's strided view in rank order") {
        CHECK_FALSE(run("allgather", s_strided, make_tensor(plain, DataType::FLOAT32, {256}), {}, 2));
        auto got = download(d, out.get(), 256);
        CHECK(std::vector<float>(got.begin(), got.begin() + 128) == std::vector<float>(128, 1.0f));
        CHECK(std::vector<float>(got.begin() + 128, got.end()) == std::vector<float>(128, 2.0f));
    }
    SECTION("allgather into more elements than the world holds refuses the ranks beyond it") {
        // A world of 1 with an output of 2n: elements of rank 1 would be a peer access beyond the world.
        CHECK(run("allgather", s, o512, {}, 1));
        auto got = download(d, out.get(), 512);
        CHECK(std::vector<float>(got.begin() + 256, got.end()) == std::vector<float>(256, -1.0f));
    }
}
