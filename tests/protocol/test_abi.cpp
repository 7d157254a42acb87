// ABI pins written from outside the headers: sizes, offsets, enumerator values, element sizes, magic
// values and the TaskArgs blob layout. A change to any of them breaks every peer process, so each is
// stated here a second time.

#include "tests/protocol/support.h"

#include <cstddef>
#include <type_traits>

using namespace canopy;
using canopy::test::get_le;

namespace {

template <class E>
constexpr unsigned raw(E e) {
    return static_cast<unsigned>(e);
}

} // namespace

TEST_CASE("CanonicalIdentity is 32 bytes with fixed field offsets", "[protocol]") {
    STATIC_REQUIRE(sizeof(CanonicalIdentity) == 32);
    STATIC_REQUIRE(alignof(CanonicalIdentity) == 8);
    STATIC_REQUIRE(std::is_trivially_copyable_v<CanonicalIdentity>);
    STATIC_REQUIRE(std::is_standard_layout_v<CanonicalIdentity>);
    STATIC_REQUIRE(offsetof(CanonicalIdentity, owner_instance) == 0);
    STATIC_REQUIRE(offsetof(CanonicalIdentity, buffer_id) == 16);
    STATIC_REQUIRE(offsetof(CanonicalIdentity, generation) == 24);
    STATIC_REQUIRE(offsetof(CanonicalIdentity, reserved) == 28);
}

TEST_CASE("BufferDescriptor is 96 bytes with fixed field offsets", "[protocol]") {
    STATIC_REQUIRE(sizeof(BufferDescriptor) == 96);
    STATIC_REQUIRE(std::is_trivially_copyable_v<BufferDescriptor>);
    STATIC_REQUIRE(std::is_standard_layout_v<BufferDescriptor>);
    STATIC_REQUIRE(offsetof(BufferDescriptor, magic) == 0);
    STATIC_REQUIRE(offsetof(BufferDescriptor, backend) == 4);
    STATIC_REQUIRE(offsetof(BufferDescriptor, access) == 5);
    STATIC_REQUIRE(offsetof(BufferDescriptor, address_space) == 6);
    STATIC_REQUIRE(offsetof(BufferDescriptor, reserved0) == 7);
    STATIC_REQUIRE(offsetof(BufferDescriptor, device) == 8);
    STATIC_REQUIRE(offsetof(BufferDescriptor, reserved1) == 12);
    STATIC_REQUIRE(offsetof(BufferDescriptor, identity) == 16);
    STATIC_REQUIRE(offsetof(BufferDescriptor, nbytes) == 48);
    STATIC_REQUIRE(offsetof(BufferDescriptor, body_len) == 56);
    STATIC_REQUIRE(offsetof(BufferDescriptor, reserved2) == 60);
    STATIC_REQUIRE(offsetof(BufferDescriptor, body) == 64);
    STATIC_REQUIRE(sizeof(BufferDescriptor::body) == 32);
}

TEST_CASE("Tensor is 176 bytes with fixed field offsets", "[protocol]") {
    STATIC_REQUIRE(sizeof(Tensor) == 176);
    STATIC_REQUIRE(std::is_trivially_copyable_v<Tensor>);
    STATIC_REQUIRE(std::is_standard_layout_v<Tensor>);
    STATIC_REQUIRE(offsetof(Tensor, buffer) == 0);
    STATIC_REQUIRE(offsetof(Tensor, byte_offset) == 96);
    STATIC_REQUIRE(offsetof(Tensor, ndims) == 104);
    STATIC_REQUIRE(offsetof(Tensor, dtype) == 105);
    STATIC_REQUIRE(offsetof(Tensor, reserved) == 106);
    STATIC_REQUIRE(sizeof(Tensor::reserved) == 6);
    STATIC_REQUIRE(offsetof(Tensor, shapes) == 112);
    STATIC_REQUIRE(sizeof(Tensor::shapes) == 32);
    STATIC_REQUIRE(offsetof(Tensor, strides) == 144);
    STATIC_REQUIRE(sizeof(Tensor::strides) == 32);
}

TEST_CASE("wire enum fields are single raw bytes", "[protocol]") {
    STATIC_REQUIRE(sizeof(WireEnum<Backend>) == 1);
    STATIC_REQUIRE(sizeof(WireEnum<DataType>) == 1);
    STATIC_REQUIRE(std::is_trivially_copyable_v<WireEnum<Access>>);
    STATIC_REQUIRE(std::is_standard_layout_v<WireEnum<AddressSpace>>);
    const WireEnum<DataType> field{std::uint8_t{200}};
    CHECK(field.raw() == 200);
    CHECK_FALSE(is_valid(DataType{field}));
}

TEST_CASE("enumerator values of the wire are frozen", "[protocol]") {
    CHECK(raw(Backend::POSIX_SHM) == 1);
    CHECK(raw(Backend::CUDA_VMM) == 2);
    CHECK(raw(Backend::SIM_VMM) == 3);
    CHECK(raw(Backend::FORK_SHM) == 4);
    CHECK(raw(Backend::FORK_COW) == 5);

    CHECK(raw(Access::READ) == 1);
    CHECK(raw(Access::WRITE) == 2);
    CHECK(raw(Access::READWRITE) == 3);

    CHECK(raw(AddressSpace::HOST) == 1);
    CHECK(raw(AddressSpace::DEVICE) == 2);

    CHECK(raw(DataType::FLOAT32) == 1);
    CHECK(raw(DataType::FLOAT16) == 2);
    CHECK(raw(DataType::BFLOAT16) == 3);
    CHECK(raw(DataType::FLOAT64) == 4);
    CHECK(raw(DataType::INT8) == 5);
    CHECK(raw(DataType::UINT8) == 6);
    CHECK(raw(DataType::INT16) == 7);
    CHECK(raw(DataType::INT32) == 8);
    CHECK(raw(DataType::INT64) == 9);

    CHECK(raw(TensorTag::INPUT) == 1);
    CHECK(raw(TensorTag::OUTPUT) == 2);
    CHECK(raw(TensorTag::INOUT) == 3);

    CHECK(raw(ScalarKind::FLOAT32) == 1);
    CHECK(raw(ScalarKind::FLOAT64) == 2);
    CHECK(raw(ScalarKind::INT64) == 3);

    CHECK(raw(Overlap::NONE) == 0);
    CHECK(raw(Overlap::PARTIAL) == 1);
    CHECK(raw(Overlap::COVERED) == 2);
}

TEST_CASE("error code values are frozen", "[protocol]") {
    STATIC_REQUIRE(sizeof(ErrorCode) == 2);
    CHECK(raw(ErrorCode::OK) == 0);
    CHECK(raw(ErrorCode::INVALID_TENSOR) == 1);
    CHECK(raw(ErrorCode::INVALID_DESCRIPTOR) == 2);
    CHECK(raw(ErrorCode::UNKNOWN_BUFFER) == 3);
    CHECK(raw(ErrorCode::STALE_BUFFER) == 4);
    CHECK(raw(ErrorCode::ACCESS_DENIED) == 5);
    CHECK(raw(ErrorCode::OVERLAPPING_WRITES) == 6);
    CHECK(raw(ErrorCode::UNREACHABLE_BUFFER) == 7);
    CHECK(raw(ErrorCode::PE_OUT_OF_RANGE) == 8);
    CHECK(raw(ErrorCode::UNKNOWN_KERNEL) == 9);
    CHECK(raw(ErrorCode::UNKNOWN_WORKER) == 10);
    CHECK(raw(ErrorCode::NO_CONSUMER) == 11);
    CHECK(raw(ErrorCode::WORKER_DIED) == 12);
    CHECK(raw(ErrorCode::KERNEL_FAILED) == 13);
    CHECK(raw(ErrorCode::TIMEOUT) == 14);
    CHECK(raw(ErrorCode::DEPENDENCY_FAILED) == 15);
    CHECK(raw(ErrorCode::BAD_REQUEST) == 16);
    CHECK(raw(ErrorCode::UNAUTHORIZED) == 17);
    CHECK(ERROR_CODE_MAX == 18);
}

TEST_CASE("element sizes match the dtype table", "[protocol]") {
    CHECK(element_size(DataType::FLOAT32) == 4);
    CHECK(element_size(DataType::FLOAT16) == 2);
    CHECK(element_size(DataType::BFLOAT16) == 2);
    CHECK(element_size(DataType::FLOAT64) == 8);
    CHECK(element_size(DataType::INT8) == 1);
    CHECK(element_size(DataType::UINT8) == 1);
    CHECK(element_size(DataType::INT16) == 2);
    CHECK(element_size(DataType::INT32) == 4);
    CHECK(element_size(DataType::INT64) == 8);
    CHECK(element_size(static_cast<DataType>(0)) == 0);
    CHECK(element_size(static_cast<DataType>(10)) == 0);
    CHECK(element_size(static_cast<DataType>(255)) == 0);
}

TEST_CASE("magic values and limits are frozen", "[protocol]") {
    CHECK(BUFFER_DESCRIPTOR_MAGIC == 0x46554243U);
    CHECK(TASK_ARGS_MAGIC == 0x47415443U);
    CHECK(TASK_ARGS_VERSION == 1);
    CHECK(DESCRIPTOR_BODY_CAPACITY == 32);
    CHECK(MAX_DEVICE_ORDINAL == 1024);
    CHECK(MAX_SHM_NAME_LENGTH == 31);
    CHECK(MAX_DIMS == 8);
    CHECK(MAX_TENSOR_ARGS == 32);
    CHECK(MAX_SCALAR_ARGS == 16);
    CHECK(TASK_ARGS_HEADER_BYTES == 16);
    CHECK(TENSOR_RECORD_BYTES == 184);
    CHECK(SCALAR_RECORD_BYTES == 16);
    CHECK(MAX_TASK_ARGS_BYTES == 16 + 32 * 184 + 16 * 16);
}

TEST_CASE("a descriptor's bytes sit at the documented offsets", "[protocol]") {
    const BufferDescriptor d = make_vmm_descriptor(Backend::SIM_VMM, test::identity(3, 0x1122334455667788ULL, 9),
                                                   0x0102030405060708ULL, Access::WRITE, 0x2a);
    const auto bytes = test::bytes_of(d);
    CHECK(std::string(bytes.begin(), bytes.begin() + 4) == "CBUF");
    CHECK(bytes[4] == 3); // SIM_VMM
    CHECK(bytes[5] == 2); // WRITE
    CHECK(bytes[6] == 2); // DEVICE
    CHECK(bytes[7] == 0);
    CHECK(bytes[8] == 0x2a);
    CHECK(bytes[9] == 0);
    CHECK(bytes[16] == d.identity.owner_instance[0]);
    CHECK(bytes[32] == 0x88); // identity.buffer_id, little-endian
    CHECK(bytes[39] == 0x11);
    CHECK(bytes[40] == 9); // identity.generation
    CHECK(bytes[48] == 0x08);
    CHECK(bytes[55] == 0x01);
    CHECK(bytes[56] == 0); // body_len
}

TEST_CASE("a fork descriptor stores its base little-endian in the body", "[protocol]") {
    const BufferDescriptor d = test::fork_descriptor(Backend::FORK_SHM, Access::READ, 0x00007f1122334455ULL);
    const auto bytes = test::bytes_of(d);
    CHECK(bytes[56] == 8);
    CHECK(bytes[64] == 0x55);
    CHECK(bytes[65] == 0x44);
    CHECK(bytes[69] == 0x7f);
    CHECK(bytes[71] == 0x00);
}

TEST_CASE("a tensor's view fields sit at the documented offsets", "[protocol]") {
    const Tensor t = make_tensor(test::shm_descriptor(1 << 16), DataType::INT16, {3, 5}, {10, 2}, 0x0102);
    const auto bytes = test::bytes_of(t);
    CHECK(bytes[96] == 0x02);
    CHECK(bytes[97] == 0x01);
    CHECK(bytes[104] == 2); // ndims
    CHECK(bytes[105] == 7); // INT16
    CHECK(bytes[112] == 3); // shapes[0]
    CHECK(bytes[116] == 5); // shapes[1]
    CHECK(bytes[120] == 0); // shapes[2]
    CHECK(bytes[144] == 10);
    CHECK(bytes[148] == 2);
    CHECK(bytes[152] == 0);
}

TEST_CASE("an encoded TaskArgs blob has the documented layout", "[protocol]") {
    const Tensor in = make_tensor(test::shm_descriptor(4096), DataType::FLOAT32, {16});
    const Tensor out = make_tensor(test::vmm_descriptor(), DataType::INT8, {4, 4}, {8, 1}, 64);
    TaskArgs args;
    args.tensors = {{in, TensorTag::INPUT}, {out, TensorTag::INOUT}};
    args.scalars = {ScalarArg::f32(1.5f), ScalarArg::i64(-2)};
    const std::vector<std::byte> blob = encode_task_args(args);

    const std::size_t size = 16 + 2 * 184 + 2 * 16;
    REQUIRE(blob.size() == size);
    CHECK(task_args_size(args) == size);
    CHECK(get_le(blob, 0, 4) == 0x47415443U); // "CTAG"
    CHECK(static_cast<char>(blob[0]) == 'C');
    CHECK(static_cast<char>(blob[3]) == 'G');
    CHECK(get_le(blob, 4, 2) == 1); // version
    CHECK(get_le(blob, 6, 2) == 0); // reserved
    CHECK(get_le(blob, 8, 4) == size);
    CHECK(get_le(blob, 12, 2) == 2); // tensor_count
    CHECK(get_le(blob, 14, 2) == 2); // scalar_count

    // Tensor records: tag byte, 7 zero bytes, the Tensor's 176 bytes.
    CHECK(get_le(blob, 16, 1) == 1);
    CHECK(get_le(blob, 17, 7) == 0);
    CHECK(std::memcmp(blob.data() + 24, &in, sizeof(Tensor)) == 0);
    CHECK(get_le(blob, 200, 1) == 3);
    CHECK(get_le(blob, 201, 7) == 0);
    CHECK(std::memcmp(blob.data() + 208, &out, sizeof(Tensor)) == 0);

    // Scalar records: kind byte, 7 zero bytes, 8 value bytes; float32 in the low 4.
    CHECK(get_le(blob, 384, 1) == 1);
    CHECK(get_le(blob, 385, 7) == 0);
    CHECK(get_le(blob, 392, 4) == 0x3fc00000U); // 1.5f
    CHECK(get_le(blob, 396, 4) == 0);
    CHECK(get_le(blob, 400, 1) == 3);
    CHECK(get_le(blob, 401, 7) == 0);
    CHECK(get_le(blob, 408, 8) == 0xfffffffffffffffeULL); // -2
}
