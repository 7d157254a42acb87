// The CUDA runtime pieces in this process: primary context, stream, the embedded module, launches, device
// memory and host registrations; then the Launcher against the CPU kernels on random strided views. [gpu]
// tests skip (WARN) where no driver or device is present.
//
// This executable initializes CUDA in its own process; it must never fork a process that uses CUDA (the
// process-level tests live in test_cuda_chip).
#include "cuda/context.h"
#include "cuda/memory.h"
#include "cuda/module.h"
#include "cuda/stream.h"
#include "tests/cuda/gpu_context.h"
#include "tests/cuda/host_views.h"
#include "worker/cuda/device_view.h"
#include "worker/cuda/fatbin.h"
#include "worker/cuda/kernel_abi.h"
#include "worker/cuda/launcher.h"
#include "worker/kernels/bounds.h"
#include "worker/kernels/builtin.h"
#include "worker/kernels/detail/strided.h"
#include "worker/kernels/half.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <cstring>
#include <optional>
#include <random>
#include <sys/mman.h>

using namespace canopy;
using namespace canopy::cuda;
using canopy::testing::fake_buffer;
using worker::cuda_abi::ElementwiseParams;

namespace {

// Anonymous shared memory, page-aligned, unmapped on destruction.
struct HostMemory {
    std::byte* data;
    std::size_t size;
    explicit HostMemory(std::size_t n) : size(n) {
        void* p = ::mmap(nullptr, n, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        REQUIRE(p != MAP_FAILED);
        data = static_cast<std::byte*>(p);
    }
    ~HostMemory() { ::munmap(data, size); }
    HostMemory(const HostMemory&) = delete;
    HostMemory& operator=(const HostMemory&) = delete;
};

} // namespace

TEST_CASE("device 0's primary context, a stream and the embedded module load, and an empty kernel runs",
          "[cuda][gpu]") {
    REQUIRE_GPU(g);
    const Driver& d = *g->driver;
    INFO("device 0: " << device_name(d, 0));
    CHECK(device_attribute(d, 0, ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR) >= 9);
    CHECK(device_attribute(d, 0, ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED) == 1);
    Stream stream(d);
    Module module(d, worker::kernel_image());
    const CuFunction noop = module.function("canopy_noop");
    for (int i = 0; i < 10; ++i) {
        launch(d, noop, {1, 1, 1}, {1, 1, 1}, 0, stream.get(), nullptr);
    }
    stream.synchronize();
    g->context->synchronize();
    // Every kernel a chip needs is in the image.
    worker::Launcher launcher(d, module);
    launcher.launch_noop(stream.get());
    stream.synchronize();
}

TEST_CASE("a missing kernel is an error naming the call, the CUDA error and the kernel", "[cuda][gpu]") {
    REQUIRE_GPU(g);
    Module module(*g->driver, worker::kernel_image());
    try {
        (void)module.function("canopy_no_such_kernel");
        FAIL("found a kernel that does not exist");
    } catch (const CudaError& e) {
        CHECK(e.call() == "cuModuleGetFunction");
        CHECK_THAT(e.what(), Catch::StartsWith("cuModuleGetFunction: CUDA_ERROR_NOT_FOUND ("));
        CHECK_THAT(e.what(), Catch::EndsWith("for kernel 'canopy_no_such_kernel'"));
        CHECK_FALSE(is_sticky(e.result()));
    }
}

TEST_CASE("device memory round-trips, and a fill kernel writes it", "[cuda][gpu]") {
    REQUIRE_GPU(g);
    const Driver& d = *g->driver;
    Stream stream(d);
    Module module(d, worker::kernel_image());
    DeviceAllocation mem(d, 4096 * sizeof(float));
    std::vector<float> host(4096);
    for (std::size_t i = 0; i < host.size(); ++i) {
        host[i] = static_cast<float>(i);
    }
    mem.copy_from_host(host.data(), host.size() * sizeof(float));
    std::vector<float> back(4096, -1.0f);
    mem.copy_to_host(back.data(), back.size() * sizeof(float));
    CHECK(back == host);
    CHECK_THROWS_AS(mem.copy_to_host(back.data(), 8, mem.size() - 4), std::out_of_range);

    ElementwiseParams p{};
    p.out =
        worker::make_device_view(make_tensor(fake_buffer(mem.size()), DataType::FLOAT32, {1000}, {4}, 8), mem.get());
    const float value = -2.5f;
    std::memcpy(&p.scalar, &value, sizeof value);
    void* args[] = {&p};
    launch(d, module.function("canopy_fill_float32"), {4, 1, 1}, {256, 1, 1}, 0, stream.get(), args);
    stream.synchronize();
    mem.copy_to_host(back.data(), back.size() * sizeof(float));
    for (std::size_t i = 0; i < back.size(); ++i) {
        const bool in_view = i >= 2 && (i - 2) % 4 == 0 && (i - 2) / 4 < 1000;
        REQUIRE(back[i] == (in_view ? value : host[i]));
    }
}

TEST_CASE("host registrations give kernels access to shared memory, read-only mappings too", "[cuda][gpu]") {
    REQUIRE_GPU(g);
    const Driver& d = *g->driver;
    Stream stream(d);
    Module module(d, worker::kernel_image());
    HostMemory src(1 << 20);
    HostMemory dst(1 << 20);
    for (std::size_t i = 0; i < src.size / 4; ++i) {
        reinterpret_cast<std::uint32_t*>(src.data)[i] = static_cast<std::uint32_t>(i * 2654435761u);
    }
    REQUIRE(::mprotect(src.data, src.size, PROT_READ) == 0);
    CHECK_THROWS_AS(HostRegistration(d, src.data, src.size, false), CudaError); // read-only needs the flag
    HostRegistration ro(d, src.data, src.size, true);
    HostRegistration rw(d, dst.data, dst.size, false);
    CHECK(ro.device_pointer() != 0);
    CHECK(rw.device_pointer() != 0);
    CHECK_THROWS_AS(HostRegistration(d, dst.data, dst.size, false), CudaError); // already registered

    const auto fake = fake_buffer(src.size);
    ElementwiseParams p{};
    p.in = worker::make_device_view(make_tensor(fake, DataType::INT32, {1 << 18}), ro.device_pointer());
    p.out = worker::make_device_view(make_tensor(fake, DataType::INT32, {1 << 18}), rw.device_pointer());
    void* args[] = {&p};
    launch(d, module.function("canopy_copy_int32"), {1024, 1, 1}, {256, 1, 1}, 0, stream.get(), args);
    stream.synchronize();
    CHECK(std::memcmp(src.data, dst.data, src.size) == 0);
}

namespace {

// A random valid view of `count` elements or fewer, with gaps, over a buffer of `capacity` elements.
Tensor random_view(std::mt19937_64& rng, const BufferDescriptor& d, DataType dtype, std::uint64_t count) {
    Tensor t{};
    t.buffer = d;
    t.dtype = dtype;
    const auto ndims = static_cast<std::uint32_t>(1 + rng() % 4);
    t.ndims = static_cast<std::uint8_t>(ndims);
    std::uint64_t left = count;
    for (std::uint32_t i = 0; i < ndims; ++i) {
        const std::uint64_t shape = i + 1 == ndims ? left : 1 + rng() % 6;
        t.shapes[i] = static_cast<std::uint32_t>(std::max<std::uint64_t>(1, std::min(shape, left)));
        left = std::max<std::uint64_t>(1, left / t.shapes[i]);
    }
    std::uint32_t stride = static_cast<std::uint32_t>(1 + rng() % 3);
    for (std::uint32_t i = ndims; i-- > 0;) {
        t.strides[i] = stride;
        stride = stride * t.shapes[i] + static_cast<std::uint32_t>(rng() % 3);
    }
    t.byte_offset = (rng() % 5) * element_size(dtype);
    return t;
}

bool is_float(DataType t) {
    return t == DataType::FLOAT32 || t == DataType::FLOAT64 || t == DataType::FLOAT16 || t == DataType::BFLOAT16;
}

double value_at(const std::byte* p, DataType dtype) {
    switch (dtype) {
    case DataType::FLOAT32: {
        float f;
        std::memcpy(&f, p, 4);
        return f;
    }
    case DataType::FLOAT64: {
        double v;
        std::memcpy(&v, p, 8);
        return v;
    }
    default: {
        std::uint16_t h;
        std::memcpy(&h, p, 2);
        return dtype == DataType::FLOAT16 ? kernels::float16_to_float(h) : kernels::bfloat16_to_float(h);
    }
    }
}

// The GPU's sum of view `x` over `base` against the CPU's, within docs/kernels.md's bound (a NaN for a NaN, the
// same infinity for an infinity).
void check_sum_within_bound(const Tensor& x, const std::byte* base, const std::byte* gpu_y, const std::byte* cpu_y) {
    double sum_abs = 0.0;
    kernels::detail::for_each_element(const_cast<std::byte*>(base), x,
                                      [&](std::byte* p) { sum_abs += std::fabs(value_at(p, x.dtype)); });
    const double got = value_at(gpu_y, x.dtype);
    const double want = value_at(cpu_y, x.dtype);
    INFO("sum of " << tensor_element_count(x) << " elements: GPU " << got << ", CPU " << want);
    if (std::isnan(want) || std::isinf(want)) {
        CHECK((std::isnan(want) ? std::isnan(got) : got == want));
        return;
    }
    CHECK(std::fabs(got - want) <= kernels::reduce_sum_bound(x.dtype, tensor_element_count(x), sum_abs, got, want));
}

} // namespace

TEST_CASE("the Launcher's kernels equal the CPU kernels on random strided views, float sums within the bound",
          "[cuda][gpu]") {
    REQUIRE_GPU(g);
    const Driver& d = *g->driver;
    Stream stream(d);
    Module module(d, worker::kernel_image());
    worker::Launcher launcher(d, module);
    constexpr std::size_t BYTES = 1 << 20;
    HostMemory a_gpu(BYTES), b_gpu(BYTES), a_cpu(BYTES), b_cpu(BYTES);
    HostRegistration ra(d, a_gpu.data, BYTES, false);
    HostRegistration rb(d, b_gpu.data, BYTES, false);
    const auto bd = fake_buffer(BYTES);
    std::mt19937_64 rng(1234);
    const std::vector<DataType> dtypes{DataType::FLOAT32,  DataType::FLOAT64, DataType::FLOAT16,
                                       DataType::BFLOAT16, DataType::INT8,    DataType::UINT8,
                                       DataType::INT16,    DataType::INT32,   DataType::INT64};
    const std::vector<std::string> names{"fill", "iota", "copy", "scale", "axpy", "reduce_sum"};
    for (int round = 0; round < 300; ++round) {
        const DataType dtype = dtypes[rng() % dtypes.size()];
        const std::string name = names[rng() % names.size()];
        INFO("round " << round << ": " << name << " " << to_string(dtype));
        for (std::size_t i = 0; i < BYTES / 8; ++i) {
            const std::uint64_t r = rng();
            std::memcpy(a_cpu.data + 8 * i, &r, 8);
            const std::uint64_t s = rng();
            std::memcpy(b_cpu.data + 8 * i, &s, 8);
        }
        std::memcpy(a_gpu.data, a_cpu.data, BYTES);
        std::memcpy(b_gpu.data, b_cpu.data, BYTES);
        const std::uint64_t count = 1 + rng() % 5000;
        const Tensor x = random_view(rng, bd, dtype, count);
        Tensor y = name == "reduce_sum" ? make_tensor(bd, dtype, {1}, {}, (rng() % 7) * element_size(dtype))
                                        : random_view(rng, bd, dtype, tensor_element_count(x));
        if (name == "copy" || name == "axpy") {
            y.shapes = {};
            y.strides = {};
            y.ndims = 1;
            y.shapes[0] = static_cast<std::uint32_t>(tensor_element_count(x));
            y.strides[0] = static_cast<std::uint32_t>(1 + rng() % 2);
        }
        validate_tensor(x);
        validate_tensor(y);
        const bool two = name == "copy" || name == "axpy" || name == "reduce_sum";
        const TensorTag first = two ? TensorTag::INPUT : TensorTag::INOUT;
        std::vector<ScalarArg> scalars;
        if (name == "fill" || name == "scale" || name == "axpy") {
            const double v = std::ldexp(static_cast<double>(static_cast<std::int64_t>(rng() % 2001) - 1000),
                                        static_cast<int>(rng() % 20) - 10);
            scalars.push_back(rng() % 3 == 0 ? ScalarArg::i64(static_cast<std::int64_t>(rng() % 200) - 100)
                              : rng() % 2    ? ScalarArg::f64(v)
                                             : ScalarArg::f32(static_cast<float>(v)));
        }
        std::vector<kernels::BoundTensor> cpu{{&x, first, a_cpu.data}};
        std::vector<std::uint64_t> bases{ra.device_pointer()};
        if (two) {
            cpu.push_back({&y, TensorTag::INOUT, b_cpu.data});
            bases.push_back(rb.device_pointer());
        }
        const kernels::KernelCall call{name, cpu, scalars, nullptr};
        kernels::run_builtin(kernels::WorkerKind::CHIP, call, false);
        launcher.launch(call, bases, stream.get());
        stream.synchronize();
        // A float sum agrees within the bound (its tree order is not the CPU's); then its bytes are made equal so
        // that everything else is compared bit for bit.
        if (name == "reduce_sum" && is_float(dtype)) {
            check_sum_within_bound(x, a_cpu.data, b_gpu.data + y.byte_offset, b_cpu.data + y.byte_offset);
            std::memcpy(b_gpu.data + y.byte_offset, b_cpu.data + y.byte_offset, element_size(dtype));
        }
        for (std::size_t at = 0; at < BYTES; at += element_size(dtype)) {
            for (const auto& [gpu_side, cpu_side] :
                 {std::pair{a_gpu.data, a_cpu.data}, std::pair{b_gpu.data, b_cpu.data}}) {
                if (std::memcmp(gpu_side + at, cpu_side + at, element_size(dtype)) == 0) {
                    continue;
                }
                bool both_nan = false;
                if (dtype == DataType::FLOAT32 && name != "copy") {
                    float p, q;
                    std::memcpy(&p, gpu_side + at, 4);
                    std::memcpy(&q, cpu_side + at, 4);
                    both_nan = std::isnan(p) && std::isnan(q);
                } else if (dtype == DataType::FLOAT64 && name != "copy") {
                    double p, q;
                    std::memcpy(&p, gpu_side + at, 8);
                    std::memcpy(&q, cpu_side + at, 8);
                    both_nan = std::isnan(p) && std::isnan(q);
                }
                if (!both_nan) {
                    FAIL("byte " << at << " differs");
                }
            }
        }
    }
}
