#include "fixture.h"

#include <catch2/catch.hpp>

using namespace canopy;
using namespace canopy::testing;
using daemon::Supervisor;

namespace {

daemon::BufferRequest symmetric(std::uint64_t nbytes, std::vector<std::string> world) {
    return {nbytes, Backend::SIM_VMM, Access::READWRITE, "", std::move(world)};
}

std::vector<float> read_floats(const BufferDescriptor& d, std::size_t n) {
    auto region = map_shm(d);
    std::vector<float> out(n);
    std::memcpy(out.data(), region.data(), n * sizeof(float));
    return out;
}

} // namespace

TEST_CASE("allgather and peer_read over a 3-rank symmetric buffer give every rank's data", "[daemon][symmetric]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 3, 0));
    sup.start();
    constexpr std::uint32_t n = 8;
    const auto sym = sup.create_buffer(symmetric(n * sizeof(float), {"chip0", "chip1", "chip2"}));
    const auto out = sup.create_buffer({3 * n * sizeof(float), Backend::POSIX_SHM, Access::READWRITE, "", {}});
    // Rank r's copy holds r*100 + i.
    for (int r = 0; r < 3; ++r) {
        const std::string chip = "chip" + std::to_string(r);
        REQUIRE(sup.run(task("iota", chip, {arg(sym, TensorTag::OUTPUT, DataType::FLOAT32, {n})})).ok());
        auto fill = task("fill", chip, {arg(out, TensorTag::OUTPUT, DataType::FLOAT32, {n})},
                         {ScalarArg::f32(100.0f * static_cast<float>(r))});
        REQUIRE(sup.run(std::move(fill)).ok());
        REQUIRE(sup.run(task("axpy", chip,
                             {arg(out, TensorTag::INPUT, DataType::FLOAT32, {n}),
                              arg(sym, TensorTag::INOUT, DataType::FLOAT32, {n})},
                             {ScalarArg::f32(1.0f)}))
                    .ok());
    }
    for (int runner = 0; runner < 3; ++runner) {
        INFO("allgather on chip" << runner);
        const std::string chip = "chip" + std::to_string(runner);
        REQUIRE(sup.run(task("allgather", chip,
                             {arg(sym, TensorTag::INPUT, DataType::FLOAT32, {n}),
                              arg(out, TensorTag::OUTPUT, DataType::FLOAT32, {3 * n})}))
                    .ok());
        const auto v = read_floats(out, 3 * n);
        for (std::uint32_t r = 0; r < 3; ++r) {
            for (std::uint32_t i = 0; i < n; ++i) {
                REQUIRE(v[r * n + i] == static_cast<float>(r * 100 + i));
            }
        }
    }
    for (std::int64_t pe = 0; pe < 3; ++pe) {
        INFO("peer_read pe " << pe << " on chip1");
        REQUIRE(sup.run(task("peer_read", "chip1",
                             {arg(sym, TensorTag::INPUT, DataType::FLOAT32, {n}),
                              arg(out, TensorTag::OUTPUT, DataType::FLOAT32, {n})},
                             {ScalarArg::i64(pe)}))
                    .ok());
        const auto v = read_floats(out, n);
        for (std::uint32_t i = 0; i < n; ++i) {
            REQUIRE(v[i] == static_cast<float>(pe * 100 + i));
        }
    }
}

TEST_CASE("peer_read with pe out of the world fails with PE_OUT_OF_RANGE and writes nothing", "[daemon][symmetric]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 3, 0));
    sup.start();
    const auto sym = sup.create_buffer(symmetric(16, {"chip0", "chip1", "chip2"}));
    const auto out = sup.create_buffer({16, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    REQUIRE(
        sup.run(task("fill", "chip0", {arg(out, TensorTag::OUTPUT, DataType::FLOAT32, {4})}, {ScalarArg::f32(-7.0f)}))
            .ok());
    for (std::int64_t pe : {std::int64_t{3}, std::int64_t{99}, std::int64_t{-1}}) {
        INFO("pe " << pe);
        const auto r = sup.run(task(
            "peer_read", "chip0",
            {arg(sym, TensorTag::INPUT, DataType::FLOAT32, {4}), arg(out, TensorTag::OUTPUT, DataType::FLOAT32, {4})},
            {ScalarArg::i64(pe)}));
        CHECK(r.code == ErrorCode::PE_OUT_OF_RANGE);
        CHECK_THAT(r.message, Catch::Contains("world of 3"));
        for (float v : read_floats(out, 4)) {
            CHECK(v == -7.0f);
        }
    }
}

TEST_CASE("a 1-rank symmetric buffer reads only its local slot", "[daemon][symmetric]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 2, 0));
    sup.start();
    const auto sym = sup.create_buffer(symmetric(16, {"chip1"}));
    const auto out = sup.create_buffer({16, Backend::POSIX_SHM, Access::READWRITE, "", {}});
    REQUIRE(sup.run(task("iota", "chip1", {arg(sym, TensorTag::OUTPUT, DataType::FLOAT32, {4})})).ok());
    REQUIRE(sup.run(task("allgather", "chip1",
                         {arg(sym, TensorTag::INPUT, DataType::FLOAT32, {4}),
                          arg(out, TensorTag::OUTPUT, DataType::FLOAT32, {4})}))
                .ok());
    CHECK(read_floats(out, 4) == std::vector<float>{0, 1, 2, 3});
    REQUIRE(sup.run(task("peer_read", "chip1",
                         {arg(sym, TensorTag::INPUT, DataType::FLOAT32, {4}),
                          arg(out, TensorTag::OUTPUT, DataType::FLOAT32, {4})},
                         {ScalarArg::i64(0)}))
                .ok());
    CHECK(read_floats(out, 4) == std::vector<float>{0, 1, 2, 3});
    auto r = sup.run(
        task("peer_read", "chip1",
             {arg(sym, TensorTag::INPUT, DataType::FLOAT32, {4}), arg(out, TensorTag::OUTPUT, DataType::FLOAT32, {4})},
             {ScalarArg::i64(1)}));
    CHECK(r.code == ErrorCode::PE_OUT_OF_RANGE);
    // chip0 holds no copy.
    r = sup.run(task("iota", "chip0", {arg(sym, TensorTag::OUTPUT, DataType::FLOAT32, {4})}));
    CHECK(r.code == ErrorCode::UNREACHABLE_BUFFER);
}

TEST_CASE("a symmetric buffer's world must name distinct live sim chips", "[daemon][symmetric]") {
    TempDir state;
    Supervisor sup(l3_options(state.path, 2, 1));
    sup.start();
    auto refused = [&](std::vector<std::string> world, ErrorCode code) {
        try {
            sup.create_buffer(symmetric(16, std::move(world)));
            FAIL("created");
        } catch (const daemon::RequestError& e) {
            CHECK(e.code() == code);
        }
    };
    refused({"chip0", "chip0"}, ErrorCode::BAD_REQUEST);
    refused({"chip0", "sub0"}, ErrorCode::NO_CONSUMER);
    refused({"chip0", "chip5"}, ErrorCode::UNKNOWN_WORKER);
}
