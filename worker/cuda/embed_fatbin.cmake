# Writes OUTPUT, a C++ source defining canopy::worker::kernel_image() over the bytes of INPUT (the fatbin).
# Run as: cmake -DINPUT=kernels.fatbin -DOUTPUT=kernels_fatbin.cpp -P embed_fatbin.cmake
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" digits)
if(digits EQUAL 0)
  message(FATAL_ERROR "embed_fatbin: ${INPUT} is empty")
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
string(REGEX REPLACE "((0x[0-9a-f][0-9a-f],)(0x[0-9a-f][0-9a-f],)(0x[0-9a-f][0-9a-f],)(0x[0-9a-f][0-9a-f],)(0x[0-9a-f][0-9a-f],)(0x[0-9a-f][0-9a-f],)(0x[0-9a-f][0-9a-f],)(0x[0-9a-f][0-9a-f],))" "\\1\n" bytes "${bytes}")
file(WRITE "${OUTPUT}.tmp" "// Generated from ${INPUT} by worker/cuda/embed_fatbin.cmake; do not edit.
#include \"worker/cuda/fatbin.h\"

namespace canopy::worker {
namespace {

alignas(64) const unsigned char FATBIN[] = {
${bytes}
};

} // namespace

std::span<const std::byte> kernel_image() noexcept {
    return std::as_bytes(std::span<const unsigned char>(FATBIN, sizeof FATBIN));
}

} // namespace canopy::worker
")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
