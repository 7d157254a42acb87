// The element-wise kernels of the Launcher on device memory in this process, against the CPU kernels, bit for bit:
// contiguous views at every start modulo 16 and at counts around the 16-byte vectors (the vector kernels, their
// head and tail), copy and axpy inputs whose vectors do and do not coincide with the output's or that are strided,
// and 2^24 + 5 elements (the grid-stride loop past one wave). [gpu]: skipped without a GPU.
//
// This executable initializes CUDA in its own process; it never forks.
#include "cuda/memory.h"
#include "cuda/module.h"
#include "cuda/stream.h"
#include "tests/cuda/gpu_context.h"
#include "tests/cuda/host_views.h"
#include "worker/cuda/device_view.h"
#include "worker/cuda/elementwise_plan.h"
#include "worker/cuda/fatbin.h"
#include "worker/cuda/launcher.h"
#include "worker/kernels/builtin.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

using namespace canopy;
using namespace canopy::testing;

namespace {

// A view of one call: `count` elements from element `offset`, every `stride`-th.
struct View {
    std::uint64_t offset;
    std::uint32_t count;
    std::uint32_t stride = 1;
};

// Two device buffers (args[0] and args[1] of a call) and their host twins, on which the CPU kernels run.
class LauncherRig {
public:
    LauncherRig(const cuda::Driver& d, std::size_t bytes)
        : stream_(d), module_(d, worker::kernel_image()), launcher_(d, module_),
          descriptor_(fake_buffer(bytes)), device_{cuda::DeviceAllocation(d, bytes), cuda::DeviceAllocation(d, bytes)},
          host_{std::vector<std::byte>(bytes), std::vector<std::byte>(bytes)} {}

    // Runs `name` over views of args[0] (and args[1] for copy and axpy) with random contents on the CPU and the
    // GPU; every byte of both buffers must agree. Returns whether the GPU ran the vector kernel.
    bool compare(const std::string& name, DataType dtype, View first, View second, std::mt19937_64& rng) {
        const bool paired = name == "copy" || name == "axpy";
        const std::size_t bytes = host_[0].size();
        for (auto& h : host_) {
            for (std::size_t i = 0; i + 8 <= bytes; i += 8) {
                const std::uint64_t r = rng();
                std::memcpy(&h[i], &r, 8);
            }
        }
        for (std::size_t k = 0; k < 2; ++k) {
            device_[k].copy_from_host(host_[k].data(), bytes);
        }
        const std::uint64_t size = element_size(dtype);
        const Tensor x = make_tensor(descriptor_, dtype, {first.count}, {first.stride}, first.offset * size);
        const Tensor y = make_tensor(descriptor_, dtype, {second.count}, {second.stride}, second.offset * size);
        std::vector<kernels::BoundTensor> cpu{{&x, paired ? TensorTag::INPUT : TensorTag::INOUT, host_[0].data()}};
        std::vector<std::uint64_t> bases{device_[0].get()};
        if (paired) {
            cpu.push_back({&y, TensorTag::INOUT, host_[1].data()});
            bases.push_back(device_[1].get());
        }
        std::vector<ScalarArg> scalars;
        if (name == "fill") {
            scalars.push_back(ScalarArg::f64(-1234.5678));
        } else if (name == "scale") {
            scalars.push_back(ScalarArg::f64(-2.5));
        } else if (name == "axpy") {
            scalars.push_back(ScalarArg::f32(2.75f));
        }
        const kernels::KernelCall call{name, cpu, scalars, nullptr};
        kernels::run_builtin(kernels::WorkerKind::CHIP, call, false);
        launcher_.launch(call, bases, stream_.get());
        stream_.synchronize();
        std::vector<std::byte> got(bytes);
        for (std::size_t k = 0; k < 2; ++k) {
            device_[k].copy_to_host(got.data(), bytes);
            check_equal(got, host_[k], dtype, name);
        }
        const Tensor& written = paired ? y : x;
        return worker::plan_elementwise(worker::make_device_view(written, bases.back())).vector;
    }

private:
    // Byte for byte, but a float32 or float64 NaN from scale or axpy may carry another payload (docs/kernels.md).
    static void check_equal(const std::vector<std::byte>& gpu, const std::vector<std::byte>& cpu, DataType dtype,
                            const std::string& name) {
        if (std::memcmp(gpu.data(), cpu.data(), gpu.size()) == 0) {
            return;
        }
        const std::size_t size = element_size(dtype);
        const bool any_nan = name == "scale" || name == "axpy";
        for (std::size_t at = 0; at + size <= gpu.size(); at += size) {
            if (std::memcmp(&gpu[at], &cpu[at], size) == 0) {
                continue;
            }
            bool both_nan = false;
            if (any_nan && dtype == DataType::FLOAT32) {
                float p, q;
                std::memcpy(&p, &gpu[at], 4);
                std::memcpy(&q, &cpu[at], 4);
                both_nan = std::isnan(p) && std::isnan(q);
            } else if (any_nan && dtype == DataType::FLOAT64) {
                double p, q;
                std::memcpy(&p, &gpu[at], 8);
                std::memcpy(&q, &cpu[at], 8);
                both_nan = std::isnan(p) && std::isnan(q);
            }
            if (!both_nan) {
                FAIL("byte " << at << " (element " << at / size << ") differs");
            }
        }
    }

    cuda::Stream stream_;
    cuda::Module module_;
    worker::Launcher launcher_;
    BufferDescriptor descriptor_;
    cuda::DeviceAllocation device_[2];
    std::vector<std::byte> host_[2];
};

} // namespace

TEST_CASE("the vector kernels equal the CPU kernels at every start modulo 16 and counts around a vector",
          "[cuda][gpu][kernels]") {
    REQUIRE_GPU(g);
    LauncherRig rig(*g->driver, 1 << 18);
    std::mt19937_64 rng(16);
    int vector_runs = 0;
    for (DataType dtype : all_dtypes()) {
        const std::uint64_t per = 16 / element_size(dtype);
        for (std::uint32_t count : {1u, 7u, 8u, 15u, 16u, 17u, 33u, 4096u + 3u}) {
            for (std::uint64_t k = 0; k < per; ++k) {
                INFO(to_string(dtype) << ", " << count << " elements from element " << k);
                for (const char* name : {"fill", "iota", "scale"}) {
                    INFO(name);
                    vector_runs += rig.compare(name, dtype, {k, count}, {0, count}, rng) ? 1 : 0;
                }
                // The input's vectors coincide with the output's, lie elsewhere modulo 16, or the input is strided.
                for (const View in : {View{k + per, count}, View{(k + 1) % per + per, count}, View{1, count, 3}}) {
                    for (const char* name : {"copy", "axpy"}) {
                        INFO(name << " from element " << in.offset << " stride " << in.stride);
                        vector_runs += rig.compare(name, dtype, in, {k, count}, rng) ? 1 : 0;
                    }
                }
            }
        }
    }
    // Every call above wrote a contiguous view, so every one of them ran a vector kernel: 8 counts, each start
    // modulo 16, 3 kernels plus 2 kernels with 3 inputs.
    int expected = 0;
    for (DataType dtype : all_dtypes()) {
        expected += 8 * static_cast<int>(16 / element_size(dtype)) * (3 + 2 * 3);
    }
    CHECK(vector_runs == expected);
}

TEST_CASE("written views that are strided run the strided kernels, with the same bits as the CPU",
          "[cuda][gpu][kernels]") {
    REQUIRE_GPU(g);
    LauncherRig rig(*g->driver, 1 << 18);
    std::mt19937_64 rng(17);
    for (DataType dtype : all_dtypes()) {
        INFO(to_string(dtype));
        for (const char* name : {"fill", "iota", "scale"}) {
            INFO(name);
            CHECK_FALSE(rig.compare(name, dtype, {3, 4099, 2}, {0, 4099}, rng));
        }
        for (const char* name : {"copy", "axpy"}) {
            INFO(name);
            CHECK_FALSE(rig.compare(name, dtype, {1, 4099}, {2, 4099, 2}, rng));
        }
    }
}

TEST_CASE("the vector kernels over 2^24 + 5 elements equal the CPU kernels", "[cuda][gpu][kernels]") {
    REQUIRE_GPU(g);
    constexpr std::uint32_t COUNT = (1u << 24) + 5;
    std::mt19937_64 rng(24);
    for (DataType dtype : all_dtypes()) {
        const std::uint64_t size = element_size(dtype);
        LauncherRig rig(*g->driver, (COUNT + 32) * size);
        INFO(to_string(dtype));
        for (const char* name : {"fill", "iota", "scale"}) {
            INFO(name);
            CHECK(rig.compare(name, dtype, {1, COUNT}, {0, COUNT}, rng));
        }
        // An input whose vectors coincide with the output's, and one whose start lies elsewhere modulo 16.
        CHECK(rig.compare("copy", dtype, {1, COUNT}, {1, COUNT}, rng));
        CHECK(rig.compare("axpy", dtype, {1, COUNT}, {1, COUNT}, rng));
        CHECK(rig.compare("axpy", dtype, {0, COUNT}, {1, COUNT}, rng));
    }
}
