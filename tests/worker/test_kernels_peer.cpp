// peer_read and allgather: reads through the peer table, PE range checks, peer table checks.
#include "test_kernels_support.h"

#include <memory>

using namespace canopy;
using namespace canopy::kernels;
using namespace canopy::kernels::test;

namespace {

constexpr std::size_t SYM_FLOATS = 16;

// One copy of a symmetric buffer per rank; rank r's element k holds 100*r + k.
struct World {
    explicit World(std::size_t n) {
        for (std::size_t r = 0; r < n; ++r) {
            copies.push_back(std::make_unique<FakeBuffer>(4 * SYM_FLOATS, std::byte{0}, 7));
            for (std::size_t k = 0; k < SYM_FLOATS; ++k) {
                copies.back()->set<float>(k, static_cast<float>(100 * r + k));
            }
        }
    }
    std::vector<std::byte*> bases() const {
        std::vector<std::byte*> out;
        for (const auto& c : copies) {
            out.push_back(c->base());
        }
        return out;
    }
    FakeBuffer& rank(std::size_t r) { return *copies[r]; }

    std::vector<std::unique_ptr<FakeBuffer>> copies;
};

} // namespace

TEST_CASE("peer_read in a world of one reads the local copy", "[kernels]") {
    World world(1);
    FakeBuffer out(4 * 4);
    CallBuilder b("peer_read");
    b.in(make_view(world.rank(0), DataType::FLOAT32, {4}, {3}, 4), world.rank(0))
        .out(make_view(out, DataType::FLOAT32, {4}), out)
        .scalar(ScalarArg::i64(0))
        .peers(world.bases(), 0);
    run(WorkerKind::CHIP, b);
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(out.get<float>(i) == static_cast<float>(1 + 3 * i));
    }
}

TEST_CASE("peer_read applies the view to the chosen rank's copy", "[kernels]") {
    World world(3);
    for (std::uint32_t pe = 0; pe < 3; ++pe) {
        FakeBuffer out(4 * 6);
        CallBuilder b("peer_read");
        // A 2x3 transpose of the first 6 elements, read as 3x2 row-major from rank pe.
        b.in(make_view(world.rank(1), DataType::FLOAT32, {3, 2}, {1, 3}), world.rank(1))
            .out(make_view(out, DataType::FLOAT32, {6}), out)
            .scalar(ScalarArg::i64(pe))
            .peers(world.bases(), 1);
        run(WorkerKind::CHIP, b);
        for (std::size_t i = 0; i < 3; ++i) {
            for (std::size_t j = 0; j < 2; ++j) {
                CHECK(out.get<float>(i * 2 + j) == static_cast<float>(100 * pe + j * 3 + i));
            }
        }
    }
}

TEST_CASE("peer_read refuses a PE outside the world and writes nothing", "[kernels]") {
    World world(3);
    for (std::int64_t pe : {std::int64_t{3}, std::int64_t{99}, std::int64_t{-1}}) {
        FakeBuffer out(4 * 4);
        CallBuilder b("peer_read");
        b.in(make_view(world.rank(2), DataType::FLOAT32, {4}), world.rank(2))
            .out(make_view(out, DataType::FLOAT32, {4}), out)
            .scalar(ScalarArg::i64(pe))
            .peers(world.bases(), 2);
        const std::string message = "peer_read: pe " + std::to_string(pe) + " is out of range for a world of 3";
        require_check_error(WorkerKind::CHIP, b, ErrorCode::PE_OUT_OF_RANGE, message);
        require_run_error(WorkerKind::CHIP, b, ErrorCode::PE_OUT_OF_RANGE, message);
        CHECK(out.bytes() == std::vector<std::byte>(16, std::byte{0xEE}));
    }
}

TEST_CASE("peer_read without a peer table passes the check but does not run", "[kernels]") {
    FakeBuffer s(16, std::byte{0});
    FakeBuffer out(16);
    CallBuilder b("peer_read");
    b.in(make_view(s, DataType::FLOAT32, {4}), s)
        .out(make_view(out, DataType::FLOAT32, {4}), out)
        .scalar(ScalarArg::i64(5));
    check(WorkerKind::CHIP, b);
    require_run_error(WorkerKind::CHIP, b, ErrorCode::BAD_REQUEST,
                      "peer_read: args[0] is not over a symmetric buffer (no peer table)");
    CHECK(out.bytes() == std::vector<std::byte>(16, std::byte{0xEE}));

    CallBuilder negative("peer_read");
    negative.in(make_view(s, DataType::FLOAT32, {4}), s)
        .out(make_view(out, DataType::FLOAT32, {4}), out)
        .scalar(ScalarArg::i64(-2));
    require_check_error(WorkerKind::CHIP, negative, ErrorCode::PE_OUT_OF_RANGE, "peer_read: pe -2 is out of range");
}

TEST_CASE("peer_read refuses a float PE and mismatched arguments", "[kernels]") {
    World world(2);
    FakeBuffer out(4 * 8);
    CallBuilder kind("peer_read");
    kind.in(make_view(world.rank(0), DataType::FLOAT32, {4}), world.rank(0))
        .out(make_view(out, DataType::FLOAT32, {4}), out)
        .scalar(ScalarArg::f32(1))
        .peers(world.bases(), 0);
    require_check_error(WorkerKind::CHIP, kind, ErrorCode::BAD_REQUEST,
                        "peer_read: scalars[0] (pe) is float32, must be int64");
    CallBuilder count("peer_read");
    count.in(make_view(world.rank(0), DataType::FLOAT32, {4}), world.rank(0))
        .out(make_view(out, DataType::FLOAT32, {8}), out)
        .scalar(ScalarArg::i64(1))
        .peers(world.bases(), 0);
    require_check_error(WorkerKind::CHIP, count, ErrorCode::BAD_REQUEST,
                        "peer_read: args[1] has 8 elements, args[0] has 4");
}

TEST_CASE("the check accepts a peer table whose bases are not known yet", "[kernels]") {
    FakeBuffer s(16, std::byte{0});
    FakeBuffer out(16);
    CallBuilder b("peer_read");
    b.in(make_view(s, DataType::FLOAT32, {4}), s)
        .out(make_view(out, DataType::FLOAT32, {4}), out)
        .scalar(ScalarArg::i64(2))
        .peers({nullptr, nullptr, nullptr}, 0);
    check(WorkerKind::CHIP, b);
    require_run_error(WorkerKind::CHIP, b, ErrorCode::KERNEL_FAILED, "peer_read: peer table: bases[0] is null");
}

TEST_CASE("a malformed peer table is refused before any read", "[kernels]") {
    World world(3);
    FakeBuffer out(16);
    const auto call_with = [&](std::vector<std::byte*> bases, std::uint32_t my_rank) {
        auto b = std::make_unique<CallBuilder>("allgather");
        b->in(make_view(world.rank(0), DataType::FLOAT32, {1}), world.rank(0))
            .out(make_view(out, DataType::FLOAT32, {bases.empty() ? 1u : static_cast<std::uint32_t>(bases.size())}),
                 out)
            .peers(std::move(bases), my_rank);
        return b;
    };
    auto bases = world.bases();
    require_run_error(WorkerKind::CHIP, *call_with({bases[0], bases[1], bases[1]}, 0), ErrorCode::KERNEL_FAILED,
                      "allgather: peer table: bases[2] equals bases[1]");
    require_run_error(WorkerKind::CHIP, *call_with({bases[1], bases[0], bases[2]}, 0), ErrorCode::KERNEL_FAILED,
                      "peer table: bases[0] (my_rank) is not the mapping of args[0]");
    require_check_error(WorkerKind::CHIP, *call_with(bases, 3), ErrorCode::KERNEL_FAILED,
                        "peer table: my_rank 3 is outside a world of 3");
    require_check_error(WorkerKind::CHIP, *call_with({}, 0), ErrorCode::KERNEL_FAILED, "peer table is empty");
    CHECK(out.bytes() == std::vector<std::byte>(16, std::byte{0xEE}));
}

TEST_CASE("allgather in a world of one copies the local view", "[kernels]") {
    World world(1);
    FakeBuffer out(4 * 4);
    CallBuilder b("allgather");
    b.in(make_view(world.rank(0), DataType::FLOAT32, {4}, {2}), world.rank(0))
        .out(make_view(out, DataType::FLOAT32, {4}), out)
        .peers(world.bases(), 0);
    run(WorkerKind::CHIP, b);
    for (std::size_t i = 0; i < 4; ++i) {
        CHECK(out.get<float>(i) == static_cast<float>(2 * i));
    }
}

TEST_CASE("allgather in a world of three puts rank r's S[i] at out[r*n + i]", "[kernels]") {
    World world(3);
    FakeBuffer out(4 * 3 * 8); // a 3x8 matrix; the view is its first 4 columns, seen as [3,4]
    CallBuilder b("allgather");
    b.in(make_view(world.rank(2), DataType::FLOAT32, {2, 2}, {4, 1}, 4), world.rank(2))
        .out(make_view(out, DataType::FLOAT32, {3, 4}, {8, 1}), out)
        .peers(world.bases(), 2);
    run(WorkerKind::CHIP, b);
    const std::size_t s_elements[] = {1, 2, 5, 6}; // row-major elements of the [2,2] view at offset 1, row pitch 4
    for (std::size_t r = 0; r < 3; ++r) {
        for (std::size_t i = 0; i < 4; ++i) {
            CHECK(out.get<float>(r * 8 + i) == static_cast<float>(100 * r + s_elements[i]));
            CHECK(out.get<std::uint32_t>(r * 8 + 4 + i) == 0xEEEEEEEE);
        }
    }
}

TEST_CASE("allgather refuses an output that is not world times n elements", "[kernels]") {
    World world(3);
    FakeBuffer out(4 * 16);
    CallBuilder b("allgather");
    b.in(make_view(world.rank(0), DataType::FLOAT32, {4}), world.rank(0))
        .out(make_view(out, DataType::FLOAT32, {8}), out)
        .peers(world.bases(), 0);
    require_check_error(WorkerKind::CHIP, b, ErrorCode::BAD_REQUEST,
                        "allgather: args[1] has 8 elements, must have world * n = 3 * 4 = 12");
    CallBuilder unknown_world("allgather");
    unknown_world.in(make_view(world.rank(0), DataType::FLOAT32, {4}), world.rank(0))
        .out(make_view(out, DataType::FLOAT32, {8}), out);
    check(WorkerKind::CHIP, unknown_world);
    require_run_error(WorkerKind::CHIP, unknown_world, ErrorCode::BAD_REQUEST,
                      "allgather: args[0] is not over a symmetric buffer");
    CallBuilder dtype("allgather");
    dtype.in(make_view(world.rank(0), DataType::FLOAT32, {4}), world.rank(0))
        .out(make_view(out, DataType::INT32, {12}), out)
        .peers(world.bases(), 0);
    require_check_error(WorkerKind::CHIP, dtype, ErrorCode::BAD_REQUEST,
                        "allgather: args[1] has dtype int32, args[0] has float32");
}
