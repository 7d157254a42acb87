// User modules on cuda chips (docs/modules.md), through a supervisor: the PTX of tests/cuda/user_module.cu loads
// into a cuda chip and its kernels compute on POSIX shm buffers (tensor parameters as device pointers with their
// byte offsets, scalars by value in any order); an unknown function, a launch over the gate's or the kernel's
// limits and a JIT failure are refused by name; a module survives the chip's restart (it is loaded again before
// any task) and is replaced by a second load; a nested supervisor forwards modules to its own cuda chips.
#include "chip_fixture.h"
#include "protocol/module_launch.h"
#include "user_module.h"

#include <catch2/catch.hpp>
#include <csignal>

using namespace canopy;
using namespace canopy::testing;
using daemon::ChildKind;
using daemon::RequestError;
using daemon::Supervisor;

namespace {

// PTX that the JIT refuses: an instruction that does not exist.
const std::string BAD_PTX = ".version 8.0\n.target sm_90\n.address_size 64\n\n.visible .entry broken()\n{\n"
                            "\tfrobnicate.u32 %r1, 1;\n\tret;\n}\n";

#define REQUIRE_MODULE_PTX()                                                                                           \
    do {                                                                                                               \
        if (user_module_ptx().empty()) {                                                                               \
            CANOPY_SKIP("built without the CUDA Toolkit, so tests/cuda/user_module.cu has no PTX");                    \
        }                                                                                                              \
    } while (0)

std::vector<std::byte> bytes(const std::string& s) {
    const auto* p = reinterpret_cast<const std::byte*>(s.data());
    return {p, p + s.size()};
}

daemon::TaskRequest module_task(std::string kernel, std::string worker, std::vector<TensorArg> tensors,
                                std::vector<ScalarArg> scalars, std::uint32_t slots, std::uint32_t grid,
                                std::uint32_t block, std::uint32_t shared = 0) {
    auto r = task(std::move(kernel), std::move(worker), std::move(tensors), std::move(scalars));
    r.launch = LaunchConfig{{grid, 1, 1}, {block, 1, 1}, shared, slots};
    return r;
}

// saxpy(y, x, a, n) over floats: parameters tensor, tensor, float32, int64.
daemon::TaskRequest saxpy(const std::string& worker, const TensorArg& y, const TensorArg& x, float a, std::int64_t n) {
    const auto blocks = static_cast<std::uint32_t>((n + 255) / 256);
    return module_task("um:saxpy", worker, {y, x}, {ScalarArg::f32(a), ScalarArg::i64(n)}, 0b1100, blocks, 256);
}

// Fills x[i] = i and y[i] = 1, runs saxpy with a = 2 on `worker`, checks y[i] = 2i + 1.
void check_saxpy(Supervisor& sup, const std::string& worker, const BufferDescriptor& x, const BufferDescriptor& y,
                 std::uint32_t n) {
    auto xs = map_shm(x);
    auto ys = map_shm(y);
    auto* xv = reinterpret_cast<float*>(xs.data());
    auto* yv = reinterpret_cast<float*>(ys.data());
    for (std::uint32_t i = 0; i < n; ++i) {
        xv[i] = static_cast<float>(i);
        yv[i] = 1.0f;
    }
    const auto r = sup.run(saxpy(worker, vector_arg(y, DataType::FLOAT32, n, TensorTag::INOUT),
                                 vector_arg(x, DataType::FLOAT32, n, TensorTag::INPUT), 2.0f, n));
    INFO(error_code_name(r.code) << ": " << r.message);
    REQUIRE(r.ok());
    for (std::uint32_t i = 0; i < n; ++i) {
        REQUIRE(yv[i] == 2.0f * static_cast<float>(i) + 1.0f);
    }
}

std::pair<ErrorCode, std::string> load_refusal(Supervisor& sup, const std::string& name, std::vector<std::byte> image) {
    try {
        (void)sup.load_module(name, std::move(image));
    } catch (const RequestError& e) {
        return {e.code(), e.what()};
    }
    FAIL("load_module(" << name << ") succeeded");
    return {};
}

} // namespace

TEST_CASE("a PTX module loads into a cuda chip and its kernels compute on shm buffers", "[cuda][chip][gpu][module]") {
    REQUIRE_GPUS(1);
    REQUIRE_MODULE_PTX();
    TempDir state;
    Supervisor sup(chip_options(state.path, {{ChildKind::CUDA_CHIP, 0}, {ChildKind::SIM_CHIP, 0}}));
    sup.start();
    const daemon::ModuleInfo info = sup.load_module("um", user_module_image());
    CHECK(info.name == "um");
    CHECK(info.format == ModuleFormat::PTX);
    CHECK(info.bytes == user_module_ptx().size());
    CHECK(info.chips == std::vector<std::string>{"/chip0"});
    REQUIRE(sup.modules().size() == 1);

    constexpr std::uint32_t n = 100000;
    const auto x = shm_buffer(sup, n * 4);
    const auto y = shm_buffer(sup, n * 4);
    check_saxpy(sup, "chip0", x, y, n);

    // Byte offsets reach the kernel: y[1000..1050) += 3 * x[0..50).
    auto ys = map_shm(y);
    auto* yv = reinterpret_cast<float*>(ys.data());
    const float before_999 = yv[999];
    const float before_1050 = yv[1050];
    REQUIRE(sup.run(saxpy("chip0", vector_arg(y, DataType::FLOAT32, 50, TensorTag::INOUT, 4000),
                          vector_arg(x, DataType::FLOAT32, 50, TensorTag::INPUT), 3.0f, 50))
                .ok());
    for (std::uint32_t i = 0; i < 50; ++i) {
        REQUIRE(yv[1000 + i] == 2.0f * static_cast<float>(1000 + i) + 1.0f + 3.0f * static_cast<float>(i));
    }
    CHECK(yv[999] == before_999);
    CHECK(yv[1050] == before_1050);

    // A scalar before the tensor, and float64: scale_first(a, x, n).
    const auto d = shm_buffer(sup, 1024 * 8);
    auto ds = map_shm(d);
    auto* dv = reinterpret_cast<double*>(ds.data());
    for (int i = 0; i < 1024; ++i) {
        dv[i] = i;
    }
    const auto r =
        sup.run(module_task("um:scale_first", "chip0", {vector_arg(d, DataType::FLOAT64, 1024, TensorTag::INOUT)},
                            {ScalarArg::f64(0.5), ScalarArg::i64(1024)}, 0b101, 4, 256));
    INFO(r.message);
    REQUIRE(r.ok());
    for (int i = 0; i < 1024; ++i) {
        REQUIRE(dv[i] == 0.5 * i);
    }
    // No parameters at all.
    CHECK(sup.run(module_task("um:empty", "chip0", {}, {}, 0, 1, 1)).ok());

    // 100 KiB of dynamic shared memory: above the 48 KiB default, so the chip raises the function's limit.
    const auto in = shm_buffer(sup, 25600 * 4);
    const auto out = shm_buffer(sup, 25600 * 4);
    auto ins = map_shm(in);
    auto outs = map_shm(out);
    auto* iv = reinterpret_cast<int*>(ins.data());
    for (int i = 0; i < 25600; ++i) {
        iv[i] = i;
    }
    const auto copied = sup.run(module_task("um:shared_copy", "chip0",
                                            {vector_arg(out, DataType::INT32, 25600, TensorTag::OUTPUT),
                                             vector_arg(in, DataType::INT32, 25600, TensorTag::INPUT)},
                                            {ScalarArg::i64(25600)}, 0b100, 1, 512, 25600 * 4));
    INFO(copied.message);
    REQUIRE(copied.ok());
    const auto* ov = reinterpret_cast<const int*>(outs.data());
    for (int i = 0; i < 25600; ++i) {
        REQUIRE(ov[i] == i + 1);
    }
    // The sim chip refuses it by name; module frames are not tasks.
    const auto sim = sup.run(module_task("um:empty", "chip1", {}, {}, 0, 1, 1));
    CHECK(sim.code == ErrorCode::UNKNOWN_KERNEL);
    CHECK(sim.message == "sim chip /chip1 cannot run module kernel um:empty (module kernels run on cuda chips)");
    CHECK(status_of(sup, "/chip0")->tasks_done == 5); // the @module_load frame is not a task
}

TEST_CASE("on a cuda chip an unknown function, a launch over the kernel's limits and bad PTX are refused by name",
          "[cuda][chip][gpu][module]") {
    REQUIRE_GPUS(1);
    REQUIRE_MODULE_PTX();
    TempDir state;
    Supervisor sup(chip_options(state.path, {{ChildKind::CUDA_CHIP, 0}}));
    sup.start();
    (void)sup.load_module("um", user_module_image());
    const auto b = shm_buffer(sup, 1 << 20);

    auto r = sup.run(module_task("um:nope", "chip0", {}, {}, 0, 1, 1));
    CHECK(r.code == ErrorCode::UNKNOWN_KERNEL);
    CHECK(r.message == "um:nope: module um has no kernel nope");
    r = sup.run(module_task("other:empty", "chip0", {}, {}, 0, 1, 1));
    CHECK(r.code == ErrorCode::UNKNOWN_KERNEL);
    CHECK(r.message == "no module other is loaded (canopy module load other FILE)");

    r = sup.run(module_task("um:empty", "chip0", {}, {}, 0, 1, 2048));
    CHECK(r.code == ErrorCode::BAD_REQUEST);
    CHECK(r.message == "um:empty: launch.block[0]: 2048 is above the limit of 1024");
    // bounded() is compiled for at most 128 threads per block: the chip refuses 256.
    r = sup.run(
        module_task("um:bounded", "chip0", {vector_arg(b, DataType::INT32, 256, TensorTag::OUTPUT)}, {}, 0, 1, 256));
    CHECK(r.code == ErrorCode::BAD_REQUEST);
    CHECK_THAT(r.message, Catch::StartsWith("um:bounded: launch.block: 256 threads per block, the kernel allows at "
                                            "most 128"));
    CHECK(sup.run(module_task("um:bounded", "chip0", {vector_arg(b, DataType::INT32, 128, TensorTag::OUTPUT)}, {}, 0, 1,
                              128))
              .ok());
    // static_shared() has 4 KiB of static shared memory: with 227 KiB of dynamic it exceeds the device's limit.
    r = sup.run(module_task("um:static_shared", "chip0", {vector_arg(b, DataType::INT32, 1024, TensorTag::OUTPUT)}, {},
                            0, 1, 1024, MAX_SHARED_BYTES));
    CHECK(r.code == ErrorCode::BAD_REQUEST);
    CHECK_THAT(r.message, Catch::StartsWith("um:static_shared: launch.shared_bytes: 232448 bytes of dynamic shared "
                                            "memory, the device of /chip0 allows at most "));

    // A JIT failure: KERNEL_FAILED with the JIT's log; the module is not recorded and the chip serves on.
    const pid_t pid = status_of(sup, "/chip0")->pid;
    const auto [code, message] = load_refusal(sup, "broken", bytes(BAD_PTX));
    INFO(message);
    CHECK(code == ErrorCode::KERNEL_FAILED);
    CHECK_THAT(message, Catch::StartsWith("module broken did not load: /chip0: @module_load:broken: "
                                          "cuModuleLoadDataEx: "));
    CHECK_THAT(message, Catch::Contains("CUDA_ERROR_INVALID_PTX") || Catch::Contains("CUDA_ERROR_INVALID_IMAGE"));
    CHECK_THAT(message, Catch::Contains("; JIT log: "));
    CHECK_THAT(message, Catch::Contains("frobnicate"));
    CHECK(sup.modules().size() == 1);
    r = sup.run(module_task("broken:broken", "chip0", {}, {}, 0, 1, 1));
    CHECK(r.code == ErrorCode::UNKNOWN_KERNEL);
    CHECK(sup.run(module_task("um:empty", "chip0", {}, {}, 0, 1, 1)).ok());
    CHECK(status_of(sup, "/chip0")->pid == pid);
    CHECK(status_of(sup, "/chip0")->restarts == 0);
}

TEST_CASE("a cuda chip restarted after SIGKILL has its modules, which a reload replaces and a failed one unloads",
          "[cuda][chip][gpu][module][fault]") {
    REQUIRE_GPUS(1);
    REQUIRE_MODULE_PTX();
    TempDir state;
    Supervisor sup(chip_options(state.path, {{ChildKind::CUDA_CHIP, 0}}));
    sup.start();
    (void)sup.load_module("um", user_module_image());
    constexpr std::uint32_t n = 4096;
    const auto x = shm_buffer(sup, n * 4);
    const auto y = shm_buffer(sup, n * 4);
    check_saxpy(sup, "chip0", x, y, n);
    const auto buffers_with_module = sup.buffers().size(); // x, y and the image of um

    const pid_t before = status_of(sup, "/chip0")->pid;
    REQUIRE(before > 0);
    REQUIRE(::kill(before, SIGKILL) == 0);
    const pid_t after = wait_restarted(sup, "/chip0", before);
    CHECK(after != before);
    check_saxpy(sup, "chip0", x, y, n);

    // Loading the same name again replaces the module; the old image's buffer is released.
    const auto info = sup.load_module("um", user_module_image());
    CHECK(info.chips == std::vector<std::string>{"/chip0"});
    CHECK(sup.modules().size() == 1);
    CHECK(sup.buffers().size() == buffers_with_module);
    check_saxpy(sup, "chip0", x, y, n);

    // A reload that fails leaves no version of the name behind.
    const auto [code, message] = load_refusal(sup, "um", bytes(BAD_PTX));
    CHECK(code == ErrorCode::KERNEL_FAILED);
    CHECK(sup.modules().empty());
    CHECK(sup.buffers().size() == buffers_with_module - 1);
    const auto r = sup.run(saxpy("chip0", vector_arg(y, DataType::FLOAT32, n, TensorTag::INOUT),
                                 vector_arg(x, DataType::FLOAT32, n, TensorTag::INPUT), 2.0f, n));
    CHECK(r.code == ErrorCode::UNKNOWN_KERNEL);
    CHECK(r.message == "no module um is loaded (canopy module load um FILE)");
}

TEST_CASE("a nested supervisor loads a module into its cuda chip and runs its kernels", "[cuda][chip][gpu][module]") {
    REQUIRE_GPUS(1);
    REQUIRE_MODULE_PTX();
    TempDir state;
    auto nested = chip_options(state.path / "node0", {{ChildKind::CUDA_CHIP, 0}});
    nested.name = "node0";
    nested.path = "/node0";
    auto root = chip_options(state.path, {}, 1);
    root.level = 4;
    root.children.push_back(
        {"node0", ChildKind::NODE, 0, std::make_shared<const daemon::SupervisorOptions>(std::move(nested)), {}});
    Supervisor sup(root);
    sup.start();
    const auto info = sup.load_module("um", user_module_image());
    CHECK(info.chips == std::vector<std::string>{"/node0/chip0"});
    constexpr std::uint32_t n = 1000;
    const auto x = shm_buffer(sup, n * 4);
    const auto y = shm_buffer(sup, n * 4);
    check_saxpy(sup, "node0/chip0", x, y, n);
    const auto r = sup.run(module_task("um:empty", "sub0", {}, {}, 0, 1, 1));
    CHECK(r.code == ErrorCode::UNKNOWN_KERNEL);
}
