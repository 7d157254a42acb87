#include "fixture.h"

#include <catch2/catch.hpp>
#include <fstream>

using namespace canopy;
using namespace canopy::testing;
using daemon::Supervisor;

namespace {

std::filesystem::path write_floats(const std::filesystem::path& dir, std::size_t n) {
    const auto path = dir / "weights.bin";
    std::ofstream out(path, std::ios::binary);
    for (std::size_t i = 0; i < n; ++i) {
        const float v = 0.25f * static_cast<float>(i);
        out.write(reinterpret_cast<const char*>(&v), sizeof v);
    }
    return path;
}

daemon::SupervisorOptions with_preloads(daemon::SupervisorOptions o, const std::filesystem::path& file) {
    o.preload.push_back({"weights", file, 0, config::PreloadBackend::FORK_COW});
    o.preload.push_back({"scratch", std::nullopt, 4096, config::PreloadBackend::FORK_SHM});
    return o;
}

} // namespace

TEST_CASE("preloaded arenas are read by every worker at the inherited address", "[daemon][arenas]") {
    TempDir state;
    const auto file = write_floats(state.path, 64);
    for (bool l4 : {false, true}) {
        INFO((l4 ? "L4" : "L3"));
        Supervisor sup(
            with_preloads(l4 ? l4_options(state.path / "l4", 1, 1) : l3_options(state.path / "l3", 1, 1), file));
        sup.start();
        const auto weights = sup.registry().find_arena("weights");
        const auto scratch = sup.registry().find_arena("scratch");
        REQUIRE(weights);
        REQUIRE(scratch);
        CHECK(Backend{weights->descriptor.backend} == Backend::FORK_COW);
        CHECK(Access{weights->descriptor.access} == Access::READ);
        CHECK(weights->descriptor.nbytes == 64 * sizeof(float));
        CHECK(Backend{scratch->descriptor.backend} == Backend::FORK_SHM);
        const auto out = sup.create_buffer({64 * sizeof(float), Backend::POSIX_SHM, Access::READWRITE, "", {}});
        const std::string chip = l4 ? "/node0/chip0" : "/chip0";
        const std::string sub = l4 ? "/node0/sub1" : "/sub0";
        // chip: weights -> scratch (shared arena); sub: scratch -> out (shm).
        REQUIRE(sup.run(task("copy", chip,
                             {arg(weights->descriptor, TensorTag::INPUT, DataType::FLOAT32, {64}),
                              arg(scratch->descriptor, TensorTag::OUTPUT, DataType::FLOAT32, {64})}))
                    .ok());
        REQUIRE(sup.run(task("copy", sub,
                             {arg(scratch->descriptor, TensorTag::INPUT, DataType::FLOAT32, {64}),
                              arg(out, TensorTag::OUTPUT, DataType::FLOAT32, {64})}))
                    .ok());
        auto mapped = map_shm(out);
        const auto* v = reinterpret_cast<const float*>(mapped.data());
        for (int i = 0; i < 64; ++i) {
            REQUIRE(v[i] == 0.25f * static_cast<float>(i));
        }
        // A read-only arena refuses writers at submit, and cannot be released.
        const auto r = sup.run(task("fill", chip, {arg(weights->descriptor, TensorTag::OUTPUT, DataType::FLOAT32, {4})},
                                    {ScalarArg::f32(1.0f)}));
        CHECK(r.code == ErrorCode::ACCESS_DENIED);
        try {
            sup.release_buffer(weights->descriptor.identity);
            FAIL("released a preloaded arena");
        } catch (const daemon::RequestError& e) {
            CHECK(e.code() == ErrorCode::BAD_REQUEST);
        }
    }
}

TEST_CASE("a preload whose file is missing stops the supervisor from starting, naming it", "[daemon][arenas]") {
    TempDir state;
    auto o = l3_options(state.path, 1, 0);
    o.preload.push_back({"weights", state.path / "absent.bin", 0, config::PreloadBackend::FORK_COW});
    try {
        Supervisor sup(o);
        FAIL("started without its preload");
    } catch (const std::runtime_error& e) {
        CHECK_THAT(std::string(e.what()), Catch::Contains("preload 'weights'") && Catch::Contains("absent.bin"));
    }
}
