// libFuzzer target: decode_task_args on arbitrary bytes. A blob either throws WireError or decodes to
// tensors that lie inside their buffers by an independent 128-bit bound check and re-encode to exactly
// the input bytes; tensor_overlap on the decoded views agrees with their byte sets where those are small
// enough to list. Anything else aborts.

#include "protocol/protocol.h"
#include "tests/protocol/reference.h"

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <span>
#include <string>
#include <vector>

namespace {

[[noreturn]] void violated(const char* what) {
    std::fprintf(stderr, "fuzz_decode_task_args: %s\n", what);
    std::abort();
}

// The bytes of a small view, sorted; empty when the view has more than MAX_BYTES bytes of elements.
std::vector<std::uint64_t> byte_set(const canopy::Tensor& t) {
    constexpr std::uint64_t MAX_BYTES = 1024;
    const std::uint32_t elem = canopy::element_size(t.dtype);
    if (canopy::tensor_element_count(t) > MAX_BYTES / elem) {
        return {};
    }
    std::vector<std::uint64_t> bytes;
    std::array<std::uint32_t, canopy::MAX_DIMS> k{};
    for (;;) {
        std::uint64_t index = 0;
        for (std::uint32_t d = 0; d < t.ndims; ++d) {
            index += std::uint64_t{k[d]} * t.strides[d];
        }
        for (std::uint32_t b = 0; b < elem; ++b) {
            bytes.push_back(t.byte_offset + index * elem + b);
        }
        std::uint32_t d = t.ndims;
        while (d > 0 && ++k[d - 1] == t.shapes[d - 1]) {
            k[--d] = 0;
        }
        if (d == 0) {
            break;
        }
    }
    std::sort(bytes.begin(), bytes.end());
    bytes.erase(std::unique(bytes.begin(), bytes.end()), bytes.end());
    return bytes;
}

// Every view overlaps itself; for small views of one buffer, NONE means no shared byte and COVERED means
// one byte set contains the other.
void check_overlaps(const canopy::TaskArgs& args) {
    std::vector<std::vector<std::uint64_t>> sets;
    for (const canopy::TensorArg& a : args.tensors) {
        if (!canopy::tensors_overlap(a.tensor, a.tensor)) {
            violated("a decoded view does not overlap itself");
        }
        sets.push_back(byte_set(a.tensor));
    }
    std::vector<std::uint64_t> shared;
    for (std::size_t i = 0; i < args.tensors.size(); ++i) {
        for (std::size_t j = 0; j < args.tensors.size(); ++j) {
            const canopy::Tensor& a = args.tensors[i].tensor;
            const canopy::Tensor& b = args.tensors[j].tensor;
            const canopy::Overlap o = canopy::tensor_overlap(a, b);
            if (!(a.buffer.identity == b.buffer.identity) || sets[i].empty() || sets[j].empty()) {
                continue;
            }
            shared.clear();
            std::set_intersection(sets[i].begin(), sets[i].end(), sets[j].begin(), sets[j].end(),
                                  std::back_inserter(shared));
            if (o == canopy::Overlap::NONE && !shared.empty()) {
                violated("tensor_overlap answered NONE for views that share a byte");
            }
            if (o == canopy::Overlap::COVERED && shared.size() != sets[i].size() && shared.size() != sets[j].size()) {
                violated("tensor_overlap answered COVERED without containment");
            }
        }
    }
}

} // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    const std::span<const std::byte> blob(reinterpret_cast<const std::byte*>(data), size);
    canopy::TaskArgs args;
    try {
        args = canopy::decode_task_args(blob);
    } catch (const canopy::WireError&) {
        return 0;
    }
    const std::string problem = canopy::test::check_decoded(args);
    if (!problem.empty()) {
        violated(problem.c_str());
    }
    const std::vector<std::byte> again = canopy::encode_task_args(args);
    if (again.size() != size || (size != 0 && std::memcmp(again.data(), data, size) != 0)) {
        violated("re-encoding a decoded blob does not reproduce its bytes");
    }
    check_overlaps(args);
    return 0;
}
