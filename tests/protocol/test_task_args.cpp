// The TaskArgs blob: round trips, every decode and encode rejection with its field, scalars.

#include "tests/protocol/support.h"

#include <bit>
#include <cmath>
#include <initializer_list>
#include <limits>

using namespace canopy;
using canopy::test::as_bytes_of;
using canopy::test::put_u16;
using canopy::test::put_u32;

namespace {

constexpr std::size_t TENSOR0 = 16;       // first tensor record
constexpr std::size_t TENSOR1 = 16 + 184; // second tensor record
constexpr std::size_t VIEW = 8;           // the Tensor inside a record
constexpr std::size_t SCALARS = 16 + 3 * 184;

// Three tensors of different dtypes, backends and tags, and one scalar of each kind.
TaskArgs sample_args() {
    TaskArgs args;
    args.tensors.push_back(
        {make_tensor(test::shm_descriptor(4096), DataType::FLOAT32, {4, 8}, {16, 2}, 64), TensorTag::INPUT});
    args.tensors.push_back(
        {make_tensor(test::vmm_descriptor(1 << 20, 2), DataType::BFLOAT16, {3, 5, 7}, {}, 6), TensorTag::OUTPUT});
    args.tensors.push_back(
        {make_tensor(test::fork_descriptor(Backend::FORK_SHM, Access::READWRITE), DataType::INT64, {100}, {3}, 8),
         TensorTag::INOUT});
    args.scalars = {ScalarArg::f32(-2.25f), ScalarArg::f64(3.0e300), ScalarArg::i64(INT64_MIN)};
    return args;
}

std::vector<std::byte> sample_blob() {
    return encode_task_args(sample_args());
}

// Byte offset of a Tensor field inside tensor record `record_at`.
constexpr std::size_t field_at(std::size_t record_at, std::size_t tensor_offset) {
    return record_at + VIEW + tensor_offset;
}

} // namespace

TEST_CASE("task args round-trip through the blob", "[protocol]") {
    const TaskArgs args = sample_args();
    const std::vector<std::byte> blob = encode_task_args(args);
    CHECK(blob.size() == task_args_size(args));
    CHECK(blob.size() == 16 + 3 * 184 + 3 * 16);
    const TaskArgs back = decode_task_args(blob);
    CHECK(back == args);
    CHECK(back.scalars[0].as_f32() == -2.25f);
    CHECK(back.scalars[1].as_f64() == 3.0e300);
    CHECK(back.scalars[2].as_i64() == INT64_MIN);
    CHECK(encode_task_args(back) == blob);
}

TEST_CASE("task args round-trip for every dtype and tag", "[protocol]") {
    TaskArgs args;
    for (std::uint8_t dtype = 1; dtype <= 9; ++dtype) {
        const auto tag = static_cast<TensorTag>(1 + dtype % 3);
        args.tensors.push_back(
            {make_tensor(test::shm_descriptor(1024), static_cast<DataType>(dtype), {2, 2}, {}, 0), tag});
    }
    args.scalars = {ScalarArg::i64(0), ScalarArg::f32(std::numeric_limits<float>::infinity())};
    CHECK(decode_task_args(encode_task_args(args)) == args);
}

TEST_CASE("empty task args encode to a bare header", "[protocol]") {
    const std::vector<std::byte> blob = encode_task_args(TaskArgs{});
    CHECK(blob.size() == TASK_ARGS_HEADER_BYTES);
    CHECK(decode_task_args(blob) == TaskArgs{});
}

TEST_CASE("task args at the count limits round-trip", "[protocol]") {
    TaskArgs args;
    for (std::uint32_t i = 0; i < MAX_TENSOR_ARGS; ++i) {
        args.tensors.push_back({make_tensor(test::shm_descriptor(), DataType::INT8, {i + 1}), TensorTag::INPUT});
    }
    for (std::uint32_t i = 0; i < MAX_SCALAR_ARGS; ++i) {
        args.scalars.push_back(ScalarArg::i64(i));
    }
    const std::vector<std::byte> blob = encode_task_args(args);
    CHECK(blob.size() == MAX_TASK_ARGS_BYTES);
    CHECK(decode_task_args(blob) == args);
}

TEST_CASE("decode_task_args_into clears and reuses its output", "[protocol]") {
    TaskArgs out = sample_args();
    out.tensors.push_back(out.tensors[0]);
    TaskArgs two;
    two.tensors = {sample_args().tensors[1]};
    two.scalars = {ScalarArg::f64(0.5)};
    decode_task_args_into(encode_task_args(two), out);
    CHECK(out == two);
    decode_task_args_into(encode_task_args(TaskArgs{}), out);
    CHECK(out.tensors.empty());
    CHECK(out.scalars.empty());
}

TEST_CASE("decode_task_args_into leaves nothing from before a failed decode", "[protocol]") {
    TaskArgs out = sample_args();
    std::vector<std::byte> blob = sample_blob();
    blob[0] = std::byte{0};
    REQUIRE_THROWS_AS(decode_task_args_into(blob, out), WireError);
    CHECK(out.tensors.empty());
    CHECK(out.scalars.empty());
}

TEST_CASE("encode_task_args_into writes into caller storage", "[protocol]") {
    const TaskArgs args = sample_args();
    std::vector<std::byte> storage(MAX_TASK_ARGS_BYTES, std::byte{0xee});
    const std::size_t n = encode_task_args_into(args, storage);
    CHECK(n == task_args_size(args));
    CHECK(std::vector<std::byte>(storage.begin(), storage.begin() + static_cast<std::ptrdiff_t>(n)) ==
          encode_task_args(args));
    CHECK(storage[n] == std::byte{0xee});
}

TEST_CASE("encode_task_args_into refuses storage that is too small", "[protocol]") {
    const TaskArgs args = sample_args();
    std::vector<std::byte> storage(task_args_size(args) - 1);
    REQUIRE_WIRE_ERROR(encode_task_args_into(args, storage), ErrorCode::INVALID_TENSOR, "header.total_len");
}

// ---- decode rejections ----

TEST_CASE("decode rejects a blob shorter than the header", "[protocol]") {
    for (const std::size_t n : std::initializer_list<std::size_t>{0, 1, 15}) {
        std::vector<std::byte> blob = sample_blob();
        blob.resize(n);
        CAPTURE(n);
        REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "header");
    }
    REQUIRE_WIRE_ERROR(decode_task_args(std::span<const std::byte>{}), ErrorCode::INVALID_TENSOR, "header");
}

TEST_CASE("decode rejects a bad magic", "[protocol]") {
    std::vector<std::byte> blob = sample_blob();
    put_u32(blob, 0, BUFFER_DESCRIPTOR_MAGIC);
    REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "header.magic");
}

TEST_CASE("decode rejects an unsupported version", "[protocol]") {
    for (const std::uint16_t version : std::initializer_list<std::uint16_t>{0, 2, 0xffff}) {
        std::vector<std::byte> blob = sample_blob();
        put_u16(blob, 4, version);
        REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "header.version");
    }
}

TEST_CASE("decode rejects non-zero header reserved bytes", "[protocol]") {
    std::vector<std::byte> blob = sample_blob();
    put_u16(blob, 6, 0x0100);
    REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "header.reserved");
}

TEST_CASE("decode rejects a total_len that differs from the blob size", "[protocol]") {
    std::vector<std::byte> blob = sample_blob();
    const auto size = static_cast<std::uint32_t>(blob.size());
    for (const std::uint32_t total : {0U, size - 1, size + 1, UINT32_MAX}) {
        put_u32(blob, 8, total);
        CAPTURE(total);
        REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "header.total_len");
    }
}

TEST_CASE("decode rejects a tensor count over the limit", "[protocol]") {
    std::vector<std::byte> blob(16);
    put_u32(blob, 0, TASK_ARGS_MAGIC);
    put_u16(blob, 4, TASK_ARGS_VERSION);
    put_u32(blob, 8, 16);
    put_u16(blob, 12, MAX_TENSOR_ARGS + 1);
    REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "header.tensor_count");
    put_u16(blob, 12, 0xffff);
    REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "header.tensor_count");
}

TEST_CASE("decode rejects a scalar count over the limit", "[protocol]") {
    std::vector<std::byte> blob(16);
    put_u32(blob, 0, TASK_ARGS_MAGIC);
    put_u16(blob, 4, TASK_ARGS_VERSION);
    put_u32(blob, 8, 16);
    put_u16(blob, 14, MAX_SCALAR_ARGS + 1);
    REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "header.scalar_count");
}

TEST_CASE("decode rejects counts that do not match the blob size", "[protocol]") {
    std::vector<std::byte> blob = sample_blob();
    put_u16(blob, 12, 4); // one tensor more than the blob holds
    REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "header.total_len");
    blob = sample_blob();
    put_u16(blob, 14, 2); // one scalar fewer than the blob holds
    REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "header.total_len");
}

TEST_CASE("decode rejects trailing bytes", "[protocol]") {
    std::vector<std::byte> blob = sample_blob();
    blob.push_back(std::byte{0});
    put_u32(blob, 8, static_cast<std::uint32_t>(blob.size()));
    const WireError e = REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "header.total_len");
    CHECK_THAT(e.problem(), Catch::Contains(std::to_string(blob.size())));
    blob.resize(blob.size() + 15);
    put_u32(blob, 8, static_cast<std::uint32_t>(blob.size())); // a scalar's worth of junk
    REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "header.total_len");
}

TEST_CASE("decode rejects an unknown tensor tag", "[protocol]") {
    for (const std::uint8_t tag : std::initializer_list<std::uint8_t>{0, 4, 255}) {
        std::vector<std::byte> blob = sample_blob();
        blob[TENSOR1] = std::byte{tag};
        CAPTURE(tag);
        REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "args[1].tag");
    }
}

TEST_CASE("decode rejects non-zero tensor record reserved bytes", "[protocol]") {
    for (std::size_t i = 1; i < 8; ++i) {
        std::vector<std::byte> blob = sample_blob();
        blob[TENSOR0 + i] = std::byte{1};
        CAPTURE(i);
        REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "args[0].reserved");
    }
}

TEST_CASE("decode rejects an unknown scalar kind", "[protocol]") {
    for (const std::uint8_t kind : std::initializer_list<std::uint8_t>{0, 4, 200}) {
        std::vector<std::byte> blob = sample_blob();
        blob[SCALARS + 16] = std::byte{kind};
        CAPTURE(kind);
        REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "scalars[1].kind");
    }
}

TEST_CASE("decode rejects non-zero scalar record reserved bytes", "[protocol]") {
    for (std::size_t i = 1; i < 8; ++i) {
        std::vector<std::byte> blob = sample_blob();
        blob[SCALARS + 32 + i] = std::byte{0x80};
        REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "scalars[2].reserved");
    }
}

TEST_CASE("decode rejects a float32 scalar with high bits set", "[protocol]") {
    std::vector<std::byte> blob = sample_blob();
    blob[SCALARS + 8 + 4] = std::byte{1};
    REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "scalars[0].value");
    blob = sample_blob();
    blob[SCALARS + 15] = std::byte{0x80};
    REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "scalars[0].value");
}

TEST_CASE("decode accepts any bit pattern in float64 and int64 scalars", "[protocol]") {
    std::vector<std::byte> blob = sample_blob();
    for (std::size_t i = 0; i < 8; ++i) {
        blob[SCALARS + 16 + 8 + i] = std::byte{0xff}; // a NaN
        blob[SCALARS + 32 + 8 + i] = std::byte{0xff}; // -1
    }
    const TaskArgs args = decode_task_args(blob);
    CHECK(std::isnan(args.scalars[1].as_f64()));
    CHECK(args.scalars[2].as_i64() == -1);
    CHECK(encode_task_args(args) == blob);
}

TEST_CASE("decode rejects an invalid tensor and names its argument", "[protocol]") {
    SECTION("a stride of zero") {
        std::vector<std::byte> blob = sample_blob();
        put_u32(blob, field_at(TENSOR1, offsetof(Tensor, strides)), 0);
        const WireError e = REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "args[1].strides[0]");
        CHECK(std::string(e.what()) == "args[1].strides[0]: stride must be > 0");
    }
    SECTION("a bad descriptor magic") {
        std::vector<std::byte> blob = sample_blob();
        blob[field_at(TENSOR0, 0)] = std::byte{0};
        REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "args[0].buffer.magic");
    }
    SECTION("a stale identity generation") {
        std::vector<std::byte> blob = sample_blob();
        put_u32(blob, field_at(TENSOR1, offsetof(Tensor, buffer) + offsetof(BufferDescriptor, identity) + 24), 0);
        REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "args[1].buffer.identity.generation");
    }
    SECTION("a view past the end of its buffer") {
        std::vector<std::byte> blob = sample_blob();
        put_u32(blob, field_at(TENSOR0, offsetof(Tensor, shapes)), 1000);
        REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "args[0].extent");
    }
    SECTION("an overflowing view") {
        std::vector<std::byte> blob = sample_blob();
        put_u32(blob, field_at(TENSOR0, offsetof(Tensor, shapes)), UINT32_MAX);
        put_u32(blob, field_at(TENSOR0, offsetof(Tensor, strides)), UINT32_MAX);
        put_u32(blob, field_at(TENSOR0, offsetof(Tensor, shapes) + 4), UINT32_MAX);
        put_u32(blob, field_at(TENSOR0, offsetof(Tensor, strides) + 4), UINT32_MAX);
        put_u32(blob, field_at(TENSOR0, offsetof(Tensor, shapes) + 8), UINT32_MAX);
        put_u32(blob, field_at(TENSOR0, offsetof(Tensor, strides) + 8), UINT32_MAX);
        blob[field_at(TENSOR0, offsetof(Tensor, ndims))] = std::byte{3};
        const WireError e = REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "args[0].extent");
        CHECK(e.problem() == "view extent overflows 64 bits");
    }
    SECTION("an unknown dtype in the third argument") {
        std::vector<std::byte> blob = sample_blob();
        blob[field_at(TENSOR1 + 184, offsetof(Tensor, dtype))] = std::byte{0};
        REQUIRE_WIRE_ERROR(decode_task_args(blob), ErrorCode::INVALID_TENSOR, "args[2].dtype");
    }
}

// ---- encode rejections ----

TEST_CASE("encode rejects more tensors than the limit", "[protocol]") {
    TaskArgs args;
    args.tensors.assign(MAX_TENSOR_ARGS + 1, sample_args().tensors[0]);
    REQUIRE_WIRE_ERROR(encode_task_args(args), ErrorCode::INVALID_TENSOR, "header.tensor_count");
}

TEST_CASE("encode rejects more scalars than the limit", "[protocol]") {
    TaskArgs args;
    args.scalars.assign(MAX_SCALAR_ARGS + 1, ScalarArg::i64(1));
    REQUIRE_WIRE_ERROR(encode_task_args(args), ErrorCode::INVALID_TENSOR, "header.scalar_count");
}

TEST_CASE("encode rejects an unknown tag", "[protocol]") {
    TaskArgs args = sample_args();
    args.tensors[2].tag = static_cast<TensorTag>(0);
    REQUIRE_WIRE_ERROR(encode_task_args(args), ErrorCode::INVALID_TENSOR, "args[2].tag");
}

TEST_CASE("encode rejects an invalid tensor and names its argument", "[protocol]") {
    TaskArgs args = sample_args();
    args.tensors[1].tensor.strides[0] = 0;
    REQUIRE_WIRE_ERROR(encode_task_args(args), ErrorCode::INVALID_TENSOR, "args[1].strides[0]");
    args = sample_args();
    args.tensors[0].tensor.buffer.body[31] = 1;
    REQUIRE_WIRE_ERROR(encode_task_args(args), ErrorCode::INVALID_TENSOR, "args[0].buffer.body[31]");
}

TEST_CASE("encode rejects an unknown scalar kind", "[protocol]") {
    TaskArgs args = sample_args();
    args.scalars[1].kind = static_cast<ScalarKind>(7);
    REQUIRE_WIRE_ERROR(encode_task_args(args), ErrorCode::INVALID_TENSOR, "scalars[1].kind");
}

TEST_CASE("encode rejects a float32 scalar with high bits set", "[protocol]") {
    TaskArgs args = sample_args();
    args.scalars[0].bits |= 1ULL << 40;
    REQUIRE_WIRE_ERROR(encode_task_args(args), ErrorCode::INVALID_TENSOR, "scalars[0].value");
}

// ---- scalars and tags ----

TEST_CASE("scalar constructors keep the bit pattern", "[protocol]") {
    CHECK(ScalarArg::f32(1.0f).bits == 0x3f800000U);
    CHECK(ScalarArg::f32(-0.0f).bits == 0x80000000U);
    CHECK(ScalarArg::f64(1.0).bits == 0x3ff0000000000000ULL);
    CHECK(ScalarArg::i64(-1).bits == UINT64_MAX);
    CHECK(ScalarArg::f32(0.1f).as_f32() == 0.1f);
    CHECK(ScalarArg::f64(0.1).as_f64() == 0.1);
    CHECK(ScalarArg::i64(INT64_MAX).as_i64() == INT64_MAX);
}

TEST_CASE("scalars convert to double and int64 whatever their kind", "[protocol]") {
    CHECK(ScalarArg::f32(2.5f).to_double() == 2.5);
    CHECK(ScalarArg::i64(-7).to_double() == -7.0);
    CHECK(ScalarArg::f64(2.9).to_int64() == 2);
    CHECK(ScalarArg::f64(-2.9).to_int64() == -2);
    CHECK(ScalarArg::f32(-3.5f).to_int64() == -3);
    CHECK(ScalarArg::i64(INT64_MIN).to_int64() == INT64_MIN);
}

TEST_CASE("scalar conversion to int64 clamps out-of-range values and NaN", "[protocol]") {
    CHECK(ScalarArg::f64(1e300).to_int64() == INT64_MAX);
    CHECK(ScalarArg::f64(-1e300).to_int64() == INT64_MIN);
    CHECK(ScalarArg::f64(9.2233720368547758e18).to_int64() == INT64_MAX);
    CHECK(ScalarArg::f64(-9.2233720368547758e18).to_int64() == INT64_MIN);
    CHECK(ScalarArg::f64(std::numeric_limits<double>::quiet_NaN()).to_int64() == 0);
    CHECK(ScalarArg::f32(std::numeric_limits<float>::infinity()).to_int64() == INT64_MAX);
    CHECK(ScalarArg::f32(-std::numeric_limits<float>::infinity()).to_int64() == INT64_MIN);
}

TEST_CASE("tags state what an argument reads and writes", "[protocol]") {
    CHECK(tag_reads(TensorTag::INPUT));
    CHECK_FALSE(tag_writes(TensorTag::INPUT));
    CHECK_FALSE(tag_reads(TensorTag::OUTPUT));
    CHECK(tag_writes(TensorTag::OUTPUT));
    CHECK(tag_reads(TensorTag::INOUT));
    CHECK(tag_writes(TensorTag::INOUT));
    CHECK(std::string(to_string(TensorTag::INOUT)) == "inout");
    CHECK(std::string(to_string(TensorTag::INPUT)) == "input");
    CHECK(std::string(to_string(TensorTag::OUTPUT)) == "output");
    CHECK(std::string(to_string(static_cast<TensorTag>(0))) == "unknown");
    CHECK(std::string(to_string(ScalarKind::FLOAT32)) == "float32");
    CHECK(std::string(to_string(ScalarKind::FLOAT64)) == "float64");
    CHECK(std::string(to_string(ScalarKind::INT64)) == "int64");
    CHECK(std::string(to_string(static_cast<ScalarKind>(4))) == "unknown");
    for (int raw = 0; raw < 256; ++raw) {
        CHECK(is_valid(static_cast<TensorTag>(raw)) == (raw >= 1 && raw <= 3));
        CHECK(is_valid(static_cast<ScalarKind>(raw)) == (raw >= 1 && raw <= 3));
    }
}
