// The tf32 launch option of built-in kernels: how the control protocol spells it ("launch": {"tf32": true}), the
// refusals of parse_task, and the supervisor's check at submit and the sim chip's run (the CPU computes the
// reference whatever the option says). The GPU side is tests/cuda/test_chip_bounds.cpp.
#include "daemon/json_codec.h"
#include "fixture.h"
#include "parse_task_support.h"
#include "protocol/builtin_launch.h"

#include <catch2/catch.hpp>
#include <cstring>

using namespace canopy;
using namespace canopy::testing;
using daemon::Supervisor;
using nlohmann::json;

namespace {

json matmul_task(const json& launch, const std::string& kernel = "matmul") {
    auto tensor = [](const char* tag) {
        return json{{"tensor", {{"buffer", "b"}, {"dtype", "float32"}, {"shape", {4, 4}}}}, {"tag", tag}};
    };
    json t = {{"kernel", kernel}, {"on", "chip0"}, {"args", {tensor("input"), tensor("input"), tensor("output")}}};
    t["launch"] = launch;
    return t;
}

std::uint32_t parsed_flags(const json& task) {
    return builtin_launch_flags(daemon::parse_task(task, one_buffer, "task").request.launch);
}

// C = A·B over 4x4 float32 matrices in their own shm buffers; A and B hold small integers.
struct Matmul {
    BufferDescriptor a, b, c;
    ipc::MappedRegion am, bm, cm;

    explicit Matmul(Supervisor& sup, DataType dtype = DataType::FLOAT32)
        : a(sup.create_buffer({128, Backend::POSIX_SHM, Access::READWRITE, "", {}})),
          b(sup.create_buffer({128, Backend::POSIX_SHM, Access::READWRITE, "", {}})),
          c(sup.create_buffer({128, Backend::POSIX_SHM, Access::READWRITE, "", {}})), am(map_shm(a)), bm(map_shm(b)),
          cm(map_shm(c)), dtype_(dtype) {
        for (int i = 0; i < 16; ++i) {
            const float x = static_cast<float>(i % 5) + 0.25f;
            const float y = static_cast<float>(i % 3) - 1.5f;
            std::memcpy(am.data() + 4 * i, &x, 4);
            std::memcpy(bm.data() + 4 * i, &y, 4);
        }
    }

    daemon::TaskRequest request(std::uint32_t flags, const std::string& worker = "chip0") const {
        auto r = task("matmul", worker,
                      {arg(a, TensorTag::INPUT, dtype_, {4, 4}), arg(b, TensorTag::INPUT, dtype_, {4, 4}),
                       arg(c, TensorTag::OUTPUT, dtype_, {4, 4})});
        set_builtin_launch_flags(r.launch, flags);
        return r;
    }

private:
    DataType dtype_;
};

} // namespace

TEST_CASE("launch.tf32 is a boolean that sets the tf32 launch flag of a built-in", "[daemon][json][launch]") {
    CHECK(parsed_flags(matmul_task({{"tf32", true}})) == BUILTIN_LAUNCH_TF32);
    CHECK(parsed_flags(matmul_task({{"tf32", false}})) == 0);
    CHECK(parsed_flags(matmul_task(json::object())) == 0);
    CHECK(parsed_flags(matmul_task({{"grid", {1}}, {"tf32", true}})) == BUILTIN_LAUNCH_TF32);
}

TEST_CASE("launch.tf32 that is not a boolean, or given to a module kernel, is refused by name",
          "[daemon][json][launch]") {
    CHECK(bad_request_message(matmul_task({{"tf32", 1}})) == "task.launch.tf32: expected true or false, got 1");
    CHECK(bad_request_message(matmul_task({{"tf32", "yes"}})) ==
          "task.launch.tf32: expected true or false, got \"yes\"");
    CHECK(bad_request_message(matmul_task({{"tf32", nullptr}})) ==
          "task.launch.tf32: expected true or false, got null");
    json module = matmul_task({{"grid", {1}}, {"block", {32}}, {"tf32", true}}, "m:gemm");
    module["params"] = {"tensor", "tensor", "tensor"};
    CHECK(bad_request_message(module) ==
          "task.launch.tf32: only built-in kernels take tf32 (a module kernel chooses its own arithmetic)");
    CHECK(bad_request_message(matmul_task({{"tf", true}})) == "task.launch: unknown key \"tf\"");
}

TEST_CASE("tf32 is refused at submit on any kernel but a float32 matmul, and undefined flags on every kernel",
          "[daemon][launch]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 1, 1));
    sup.start();
    const Matmul bf16(sup, DataType::BFLOAT16);
    auto r = sup.run(bf16.request(BUILTIN_LAUNCH_TF32));
    CHECK(r.code == ErrorCode::BAD_REQUEST);
    CHECK(r.message == "matmul: launch.tf32 applies to float32 only; args[0] has dtype bfloat16");
    const Matmul f64(sup, DataType::FLOAT64);
    r = sup.run(f64.request(BUILTIN_LAUNCH_TF32));
    CHECK(r.message == "matmul: launch.tf32 applies to float32 only; args[0] has dtype float64");
    for (const std::string worker : {"chip0", "sub0"}) {
        auto fill =
            task("fill", worker, {arg(bf16.c, TensorTag::OUTPUT, DataType::FLOAT32, {16})}, {ScalarArg::f32(1)});
        set_builtin_launch_flags(fill.launch, BUILTIN_LAUNCH_TF32);
        r = sup.run(fill);
        CHECK(r.code == ErrorCode::BAD_REQUEST);
        CHECK(r.message == "fill: launch.tf32 applies to matmul only");
        set_builtin_launch_flags(fill.launch, 0x80000002u);
        r = sup.run(fill);
        CHECK(r.code == ErrorCode::BAD_REQUEST);
        CHECK(r.message == "fill: launch flags 0x80000002 are not defined (bit 0 is tf32, the only launch flag)");
    }
    const Matmul f32(sup);
    auto undefined = f32.request(BUILTIN_LAUNCH_TF32 | 0x4u);
    r = sup.run(undefined);
    CHECK(r.code == ErrorCode::BAD_REQUEST);
    CHECK(r.message == "matmul: launch flags 0x4 are not defined (bit 0 is tf32, the only launch flag)");
}

TEST_CASE("a sim chip runs a float32 matmul with tf32 to the same bits as without", "[daemon][launch]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 1, 0));
    sup.start();
    const Matmul m(sup);
    REQUIRE(sup.run(m.request(0)).ok());
    std::vector<std::byte> plain(m.cm.data(), m.cm.data() + 64);
    std::memset(m.cm.data(), 0, 64);
    const auto r = sup.run(m.request(BUILTIN_LAUNCH_TF32));
    INFO(r.message);
    REQUIRE(r.ok());
    CHECK(std::memcmp(plain.data(), m.cm.data(), 64) == 0);
    float c00 = 0;
    std::memcpy(&c00, m.cm.data(), 4);
    CHECK(c00 != 0.0f);
}
