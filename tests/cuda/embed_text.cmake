# Writes OUTPUT, a C++ source defining `std::string_view NAMESPACE::FUNCTION() noexcept` over the bytes of INPUT.
# Run as: cmake -DINPUT=f.ptx -DOUTPUT=f.cpp -DNAMESPACE=canopy::testing -DFUNCTION=user_module_ptx -P embed_text.cmake
file(READ "${INPUT}" hex HEX)
string(LENGTH "${hex}" digits)
if(digits EQUAL 0)
  message(FATAL_ERROR "embed_text: ${INPUT} is empty")
endif()
string(REGEX REPLACE "([0-9a-f][0-9a-f])" "0x\\1," bytes "${hex}")
file(WRITE "${OUTPUT}.tmp" "// Generated from ${INPUT} by tests/cuda/embed_text.cmake; do not edit.
#include <string_view>

namespace ${NAMESPACE} {
namespace {

const char TEXT[] = {
${bytes}
};

} // namespace

std::string_view ${FUNCTION}() noexcept {
    return std::string_view(TEXT, sizeof TEXT);
}

} // namespace ${NAMESPACE}
")
file(RENAME "${OUTPUT}.tmp" "${OUTPUT}")
