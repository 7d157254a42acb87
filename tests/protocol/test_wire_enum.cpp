// Wire enums (validity of every raw byte, names, access bits, address spaces) and error codes / WireError.

#include "tests/protocol/support.h"

#include <string>

using namespace canopy;

TEST_CASE("only listed enumerators are valid for every raw byte", "[protocol]") {
    for (int raw = 0; raw < 256; ++raw) {
        CAPTURE(raw);
        CHECK(is_valid(static_cast<Backend>(raw)) == (raw >= 1 && raw <= 5));
        CHECK(is_valid(static_cast<Access>(raw)) == (raw >= 1 && raw <= 3));
        CHECK(is_valid(static_cast<AddressSpace>(raw)) == (raw >= 1 && raw <= 2));
        CHECK(is_valid(static_cast<DataType>(raw)) == (raw >= 1 && raw <= 9));
        CHECK((element_size(static_cast<DataType>(raw)) != 0) == (raw >= 1 && raw <= 9));
    }
}

TEST_CASE("enum names are the lower-case spellings of JSON and logs", "[protocol]") {
    CHECK(std::string(to_string(Backend::POSIX_SHM)) == "posix_shm");
    CHECK(std::string(to_string(Backend::CUDA_VMM)) == "cuda_vmm");
    CHECK(std::string(to_string(Backend::SIM_VMM)) == "sim_vmm");
    CHECK(std::string(to_string(Backend::FORK_SHM)) == "fork_shm");
    CHECK(std::string(to_string(Backend::FORK_COW)) == "fork_cow");
    CHECK(std::string(to_string(Access::READ)) == "read");
    CHECK(std::string(to_string(Access::WRITE)) == "write");
    CHECK(std::string(to_string(Access::READWRITE)) == "readwrite");
    CHECK(std::string(to_string(AddressSpace::HOST)) == "host");
    CHECK(std::string(to_string(AddressSpace::DEVICE)) == "device");
    CHECK(std::string(to_string(DataType::FLOAT32)) == "float32");
    CHECK(std::string(to_string(DataType::FLOAT16)) == "float16");
    CHECK(std::string(to_string(DataType::BFLOAT16)) == "bfloat16");
    CHECK(std::string(to_string(DataType::FLOAT64)) == "float64");
    CHECK(std::string(to_string(DataType::INT8)) == "int8");
    CHECK(std::string(to_string(DataType::UINT8)) == "uint8");
    CHECK(std::string(to_string(DataType::INT16)) == "int16");
    CHECK(std::string(to_string(DataType::INT32)) == "int32");
    CHECK(std::string(to_string(DataType::INT64)) == "int64");
}

TEST_CASE("unknown enum values print as unknown", "[protocol]") {
    CHECK(std::string(to_string(static_cast<Backend>(0))) == "unknown");
    CHECK(std::string(to_string(static_cast<Access>(4))) == "unknown");
    CHECK(std::string(to_string(static_cast<AddressSpace>(3))) == "unknown");
    CHECK(std::string(to_string(static_cast<DataType>(10))) == "unknown");
}

TEST_CASE("access grants are bits of READWRITE", "[protocol]") {
    CHECK(grants_read(Access::READ));
    CHECK_FALSE(grants_write(Access::READ));
    CHECK_FALSE(grants_read(Access::WRITE));
    CHECK(grants_write(Access::WRITE));
    CHECK(grants_read(Access::READWRITE));
    CHECK(grants_write(Access::READWRITE));
}

TEST_CASE("each backend lives in one address space", "[protocol]") {
    CHECK(address_space_of(Backend::POSIX_SHM) == AddressSpace::HOST);
    CHECK(address_space_of(Backend::FORK_SHM) == AddressSpace::HOST);
    CHECK(address_space_of(Backend::FORK_COW) == AddressSpace::HOST);
    CHECK(address_space_of(Backend::CUDA_VMM) == AddressSpace::DEVICE);
    CHECK(address_space_of(Backend::SIM_VMM) == AddressSpace::DEVICE);
}

TEST_CASE("error code names round-trip", "[protocol]") {
    for (std::uint16_t raw = 0; raw <= ERROR_CODE_MAX; ++raw) {
        const auto code = static_cast<ErrorCode>(raw);
        const std::string_view name = error_code_name(code);
        CAPTURE(raw, name);
        CHECK(error_code_from_name(name) == code);
    }
    CHECK(error_code_name(ErrorCode::OK) == "OK");
    CHECK(error_code_name(ErrorCode::INVALID_TENSOR) == "INVALID_TENSOR");
    CHECK(error_code_name(ErrorCode::OVERLAPPING_WRITES) == "OVERLAPPING_WRITES");
    CHECK(error_code_name(ErrorCode::UNAUTHORIZED) == "UNAUTHORIZED");
    CHECK(error_code_name(static_cast<ErrorCode>(ERROR_CODE_MAX + 1)) == "UNKNOWN_ERROR");
    CHECK_FALSE(error_code_from_name("invalid_tensor").has_value());
    CHECK_FALSE(error_code_from_name("").has_value());
    CHECK_FALSE(error_code_from_name("UNKNOWN_ERROR").has_value());
}

TEST_CASE("a WireError reads FIELD: PROBLEM", "[protocol]") {
    const WireError e(ErrorCode::INVALID_TENSOR, "args[1].strides[0]", "stride must be > 0");
    CHECK(std::string(e.what()) == "args[1].strides[0]: stride must be > 0");
    CHECK(e.field() == "args[1].strides[0]");
    CHECK(e.problem() == "stride must be > 0");
    CHECK(e.code() == ErrorCode::INVALID_TENSOR);
    const std::invalid_argument& base = e;
    CHECK(std::string(base.what()) == e.what());

    const WireError bare(ErrorCode::BAD_REQUEST, "", "no field");
    CHECK(std::string(bare.what()) == "no field");
}
