#include "fixture.h"

#include <catch2/catch.hpp>
#include <signal.h>
#include <thread>

using namespace canopy;
using namespace canopy::testing;
using daemon::Supervisor;

TEST_CASE("an L4 supervisor runs tasks on the workers of its nested L3 nodes with one identity", "[daemon]") {
    TempDir state;
    Supervisor sup(l4_options(state.path, 2, 1));
    sup.start();
    const auto status = sup.status();
    std::vector<std::string> paths;
    for (const auto& w : status) {
        paths.push_back(w.path);
        CHECK(w.state == daemon::WorkerState::RUNNING);
        CHECK(w.pid > 0);
    }
    CHECK(paths == std::vector<std::string>{"/sub0", "/node0", "/node0/chip0", "/node0/chip1", "/node0/sub0",
                                            "/node0/sub1", "/node1", "/node1/chip0", "/node1/chip1", "/node1/sub0",
                                            "/node1/sub1"});
    const auto buf = sup.create_buffer({32 * sizeof(double), Backend::POSIX_SHM, Access::READWRITE, "", {}});
    auto host = map_shm(buf);
    auto* v = reinterpret_cast<double*>(host.data());
    for (const char* worker : {"/sub0", "/node0/chip0", "node0/chip1", "/node0/sub1", "/node1/chip1", "/node1/sub0"}) {
        INFO(worker);
        std::fill(v, v + 32, -1.0);
        auto r = sup.run(task("fill", worker, {arg(buf, TensorTag::OUTPUT, DataType::FLOAT64, {4, 4}, {8, 2}, 8)},
                              {ScalarArg::f64(0.5)}));
        REQUIRE(r.ok());
        for (int i = 0; i < 32; ++i) {
            const int row = (i - 1) / 8;
            const int col = (i - 1) % 8;
            const bool in_view = i >= 1 && row < 4 && col < 8 && col % 2 == 0 && (i - 1) >= 0;
            REQUIRE(v[i] == (in_view ? 0.5 : -1.0));
        }
    }
    auto r =
        sup.run(task("fill", "/node0", {arg(buf, TensorTag::OUTPUT, DataType::FLOAT64, {4})}, {ScalarArg::f64(1)}));
    CHECK(r.code == ErrorCode::UNKNOWN_WORKER);
    r = sup.run(
        task("fill", "/node0/chip9", {arg(buf, TensorTag::OUTPUT, DataType::FLOAT64, {4})}, {ScalarArg::f64(1)}));
    CHECK(r.code == ErrorCode::UNKNOWN_WORKER);
    r = sup.run(task("matmul", "/node1/sub0", {}));
    CHECK(r.code == ErrorCode::UNKNOWN_KERNEL);
}

TEST_CASE("an L4 whose children are only L3 nodes creates shm buffers", "[daemon]") {
    TempDir state;
    Supervisor sup(l4_options(state.path, 1, 0));
    sup.start();
    const auto buf = sup.create_buffer({4096, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    CHECK(Backend{buf.backend} == Backend::POSIX_SHM);
    CHECK(sup.run(task("iota", "/node0/chip0", {arg(buf, TensorTag::OUTPUT, DataType::INT32, {1024})})).ok());
    try {
        sup.create_buffer({4096, Backend::SIM_VMM, Access::READWRITE, "", {}});
        FAIL("an L4 created a device buffer");
    } catch (const daemon::RequestError& e) {
        CHECK(e.code() == ErrorCode::NO_CONSUMER);
    }
}

TEST_CASE("create_buffer on a node whose children are all dead fails with NO_CONSUMER", "[daemon]") {
    TempDir state;
    auto options = l3_options(state.path, 1, 0);
    options.fault_kernels = true;
    options.restart_budget = 0;
    Supervisor sup(options);
    sup.start();
    CHECK(sup.run(task("abort", "chip0", {})).code == ErrorCode::WORKER_DIED);
    for (int i = 0; i < 200 && sup.status()[0].state != daemon::WorkerState::DEAD; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    REQUIRE(sup.status()[0].state == daemon::WorkerState::DEAD);
    try {
        sup.create_buffer({4096, Backend::POSIX_SHM, Access::READWRITE, "", {}});
        FAIL("created a buffer nobody can consume");
    } catch (const daemon::RequestError& e) {
        CHECK(e.code() == ErrorCode::NO_CONSUMER);
    }
}

TEST_CASE("sim_vmm buffers reach sim chips by file descriptor and never subs", "[daemon]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 2, 1));
    sup.start();
    const auto dev = sup.create_buffer({64 * sizeof(float), Backend::SIM_VMM, Access::READWRITE, "chip1", {}});
    CHECK(Backend{dev.backend} == Backend::SIM_VMM);
    CHECK(dev.device == 1);
    const auto host = sup.create_buffer({64 * sizeof(float), Backend::POSIX_SHM, Access::READWRITE, "", {}});
    REQUIRE(sup.run(task("iota", "chip1", {arg(dev, TensorTag::OUTPUT, DataType::FLOAT32, {64})})).ok());
    REQUIRE(
        sup.run(task("scale", "chip0", {arg(dev, TensorTag::INOUT, DataType::FLOAT32, {64})}, {ScalarArg::f32(3.0f)}))
            .ok());
    REQUIRE(sup.run(task("copy", "chip1",
                         {arg(dev, TensorTag::INPUT, DataType::FLOAT32, {64}),
                          arg(host, TensorTag::OUTPUT, DataType::FLOAT32, {64})}))
                .ok());
    auto mapped = map_shm(host);
    const auto* v = reinterpret_cast<const float*>(mapped.data());
    for (int i = 0; i < 64; ++i) {
        REQUIRE(v[i] == 3.0f * static_cast<float>(i));
    }
    const auto r = sup.run(task("iota", "sub0", {arg(dev, TensorTag::OUTPUT, DataType::FLOAT32, {64})}));
    CHECK(r.code == ErrorCode::UNREACHABLE_BUFFER);
}

TEST_CASE("an L4 makes device buffers on the chips of its nodes and relays their fds both ways", "[daemon][levels]") {
    TempDir state;
    Supervisor sup(l4_options(state.path, 2, 0));
    sup.start();
    // Made by /node0/chip1: the fd comes up through node0, which holds nothing of it.
    const auto dev = sup.create_buffer({64 * sizeof(float), Backend::SIM_VMM, Access::READWRITE, "/node0/chip1", {}});
    CHECK(sup.registry().find(dev.identity)->creator == "/node0/chip1");
    CHECK(dev.device == 1);
    const auto host = sup.create_buffer({64 * sizeof(float), Backend::POSIX_SHM, Access::READWRITE, "", {}});
    REQUIRE(sup.run(task("iota", "/node0/chip1", {arg(dev, TensorTag::OUTPUT, DataType::FLOAT32, {64})})).ok());
    // Consumers below both nodes get the fd from the L4 through their node.
    const auto scaled = sup.run(
        task("scale", "/node1/chip0", {arg(dev, TensorTag::INOUT, DataType::FLOAT32, {64})}, {ScalarArg::f32(2)}));
    INFO(scaled.message);
    REQUIRE(scaled.ok());
    REQUIRE(sup.run(task("copy", "/node0/chip0",
                         {arg(dev, TensorTag::INPUT, DataType::FLOAT32, {64}),
                          arg(host, TensorTag::OUTPUT, DataType::FLOAT32, {64})}))
                .ok());
    auto mapped = map_shm(host);
    const auto* v = reinterpret_cast<const float*>(mapped.data());
    for (int i = 0; i < 64; ++i) {
        REQUIRE(v[i] == 2.0f * static_cast<float>(i));
    }
    // A sub below a node cannot reach it.
    const auto sub = sup.run(task("iota", "/node1/sub0", {arg(dev, TensorTag::OUTPUT, DataType::FLOAT32, {64})}));
    CHECK(sub.code == ErrorCode::UNREACHABLE_BUFFER);
    // Released at the L4: stale everywhere; the slot's next buffer goes through the nodes afresh.
    REQUIRE_FALSE(sup.release_buffer(dev.identity));
    const auto stale = sup.run(task("iota", "/node1/chip0", {arg(dev, TensorTag::OUTPUT, DataType::FLOAT32, {64})}));
    CHECK(stale.code == ErrorCode::STALE_BUFFER);
    const auto next = sup.create_buffer({64 * sizeof(float), Backend::SIM_VMM, Access::READWRITE, "/node1/chip1", {}});
    CHECK(next.identity.buffer_id == dev.identity.buffer_id);
    REQUIRE(sup.run(task("fill", "/node1/chip1", {arg(next, TensorTag::OUTPUT, DataType::FLOAT32, {64})},
                         {ScalarArg::f32(4)}))
                .ok());
    REQUIRE(sup.run(task("copy", "/node1/chip0",
                         {arg(next, TensorTag::INPUT, DataType::FLOAT32, {64}),
                          arg(host, TensorTag::OUTPUT, DataType::FLOAT32, {64})}))
                .ok());
    CHECK(v[63] == 4.0f);
}

TEST_CASE("an L4 symmetric buffer spans chips of two nodes", "[daemon][levels][symmetric]") {
    TempDir state;
    Supervisor sup(l4_options(state.path, 2, 0));
    sup.start();
    const auto s = sup.create_buffer(
        {32 * sizeof(float), Backend::SIM_VMM, Access::READWRITE, "", {"/node0/chip1", "/node1/chip0"}});
    CHECK(sup.registry().find(s.identity)->world == std::vector<std::string>{"/node0/chip1", "/node1/chip0"});
    REQUIRE(
        sup.run(task("fill", "/node0/chip1", {arg(s, TensorTag::OUTPUT, DataType::FLOAT32, {32})}, {ScalarArg::f32(1)}))
            .ok());
    REQUIRE(
        sup.run(task("fill", "/node1/chip0", {arg(s, TensorTag::OUTPUT, DataType::FLOAT32, {32})}, {ScalarArg::f32(2)}))
            .ok());
    const auto out = sup.create_buffer({64 * sizeof(float), Backend::POSIX_SHM, Access::READWRITE, "", {}});
    auto mapped = map_shm(out);
    const auto* v = reinterpret_cast<const float*>(mapped.data());
    for (const char* chip : {"/node0/chip1", "/node1/chip0"}) {
        INFO(chip);
        std::memset(mapped.data(), 0, 64 * sizeof(float));
        const auto r = sup.run(task(
            "allgather", chip,
            {arg(s, TensorTag::INPUT, DataType::FLOAT32, {32}), arg(out, TensorTag::OUTPUT, DataType::FLOAT32, {64})}));
        INFO(r.message);
        REQUIRE(r.ok());
        CHECK(v[0] == 1.0f);
        CHECK(v[31] == 1.0f);
        CHECK(v[32] == 2.0f);
        CHECK(v[63] == 2.0f);
    }
    // A chip outside the world has no copy; a pe outside the world is refused at submit.
    const auto outside = sup.run(
        task("fill", "/node0/chip0", {arg(s, TensorTag::OUTPUT, DataType::FLOAT32, {32})}, {ScalarArg::f32(1)}));
    CHECK(outside.code == ErrorCode::UNREACHABLE_BUFFER);
    const auto pe = sup.run(
        task("peer_read", "/node1/chip0",
             {arg(s, TensorTag::INPUT, DataType::FLOAT32, {32}), arg(out, TensorTag::OUTPUT, DataType::FLOAT32, {32})},
             {ScalarArg::i64(2)}));
    CHECK(pe.code == ErrorCode::PE_OUT_OF_RANGE);
}
