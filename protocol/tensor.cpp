#include "protocol/tensor.h"

#include "protocol/detail/invalid_tensor.h"
#include "protocol/detail/saturating.h"

#include <algorithm>
#include <cstring>
#include <string>

namespace canopy {
namespace {

std::string indexed(const char* name, std::uint32_t i) {
    return std::string(name) + "[" + std::to_string(i) + "]";
}

// True when every slot below ndims holds a non-zero shape and stride and every slot past it holds zeros.
// Branch-free over all MAX_DIMS slots; the loops of check_dims find the culprit when this says no.
bool dims_are_clean(const Tensor& t) noexcept {
    std::uint32_t bad = 0;
    for (std::uint32_t i = 0; i < MAX_DIMS; ++i) {
        const auto zero = static_cast<std::uint32_t>(t.shapes[i] == 0) | static_cast<std::uint32_t>(t.strides[i] == 0);
        const std::uint32_t set = t.shapes[i] | t.strides[i];
        bad |= i < t.ndims ? zero : set;
    }
    return bad == 0;
}

void check_dims(const Tensor& t) {
    if (t.ndims < 1 || t.ndims > MAX_DIMS) {
        detail::invalid_tensor("ndims",
                               "ndims must be 1.." + std::to_string(MAX_DIMS) + ", got " + std::to_string(t.ndims));
    }
    if (dims_are_clean(t)) {
        return;
    }
    for (std::uint32_t i = 0; i < t.ndims; ++i) {
        if (t.shapes[i] == 0) {
            detail::invalid_tensor(indexed("shapes", i), "shape must be > 0");
        }
        if (t.strides[i] == 0) {
            detail::invalid_tensor(indexed("strides", i), "stride must be > 0");
        }
    }
    for (std::uint32_t i = t.ndims; i < MAX_DIMS; ++i) {
        if (t.shapes[i] != 0) {
            detail::invalid_tensor(indexed("shapes", i), "slots past ndims must be zero");
        }
        if (t.strides[i] != 0) {
            detail::invalid_tensor(indexed("strides", i), "slots past ndims must be zero");
        }
    }
}

void check_bounds(const Tensor& t, std::uint32_t elem) {
    if (t.byte_offset % elem != 0) {
        detail::invalid_tensor("byte_offset", "byte offset " + std::to_string(t.byte_offset) +
                                                  " is not a multiple of the " + std::to_string(elem) +
                                                  "-byte element size");
    }
    const std::uint64_t extent = tensor_extent_bytes(t);
    if (extent == UINT64_MAX) {
        detail::invalid_tensor("extent", "view extent overflows 64 bits");
    }
    const std::uint64_t nbytes = t.buffer.nbytes;
    if (t.byte_offset > nbytes) {
        detail::invalid_tensor("byte_offset", "byte offset " + std::to_string(t.byte_offset) +
                                                  " is past the end of the " + std::to_string(nbytes) + "-byte buffer");
    }
    if (extent > nbytes - t.byte_offset) {
        detail::invalid_tensor("extent", "view of " + std::to_string(extent) + " bytes at offset " +
                                             std::to_string(t.byte_offset) + " exceeds the " + std::to_string(nbytes) +
                                             "-byte buffer");
    }
}

} // namespace

void validate_tensor(const Tensor& t) {
    validate_descriptor_as(t.buffer, ErrorCode::INVALID_TENSOR, "buffer.");
    if (!is_valid(DataType{t.dtype})) {
        detail::invalid_tensor("dtype", "unknown dtype " + std::to_string(t.dtype.raw()));
    }
    std::uint64_t reserved = 0;
    std::memcpy(&reserved, t.reserved.data(), t.reserved.size());
    for (std::size_t i = 0; reserved != 0 && i < t.reserved.size(); ++i) {
        if (t.reserved[i] != 0) {
            detail::invalid_tensor(indexed("reserved", static_cast<std::uint32_t>(i)), "reserved bytes must be zero");
        }
    }
    check_dims(t);
    check_bounds(t, element_size(t.dtype));
}

std::uint64_t tensor_extent_bytes(const Tensor& t) noexcept {
    using detail::sat_add;
    using detail::sat_mul;
    const std::uint32_t dims = std::min<std::uint32_t>(t.ndims, MAX_DIMS);
    std::uint64_t last = 0; // element index of the last element, saturating
    for (std::uint32_t i = 0; i < dims; ++i) {
        if (t.shapes[i] == 0) {
            return 0;
        }
        last = sat_add(last, sat_mul(t.shapes[i] - 1ULL, t.strides[i]));
    }
    return sat_mul(sat_add(last, 1), element_size(t.dtype));
}

std::uint64_t tensor_element_count(const Tensor& t) noexcept {
    const std::uint32_t dims = std::min<std::uint32_t>(t.ndims, MAX_DIMS);
    std::uint64_t count = dims == 0 ? 0 : 1;
    for (std::uint32_t i = 0; i < dims; ++i) {
        count = detail::sat_mul(count, t.shapes[i]);
    }
    return count;
}

bool tensor_is_contiguous(const Tensor& t) noexcept {
    const std::uint32_t dims = std::min<std::uint32_t>(t.ndims, MAX_DIMS);
    if (dims == 0 || t.strides[dims - 1] != 1) {
        return false;
    }
    for (std::uint32_t i = dims - 1; i > 0; --i) {
        if (static_cast<std::uint64_t>(t.strides[i - 1]) != std::uint64_t{t.strides[i]} * t.shapes[i]) {
            return false;
        }
    }
    return true;
}

Tensor make_tensor(const BufferDescriptor& buffer, DataType dtype, std::initializer_list<std::uint32_t> shapes,
                   std::initializer_list<std::uint32_t> strides, std::uint64_t byte_offset) {
    Tensor t{};
    t.buffer = buffer;
    t.byte_offset = byte_offset;
    t.dtype = dtype;
    if (shapes.size() < 1 || shapes.size() > MAX_DIMS) {
        detail::invalid_tensor("ndims", "ndims must be 1.." + std::to_string(MAX_DIMS) + ", got " +
                                            std::to_string(shapes.size()));
    }
    if (strides.size() != 0 && strides.size() != shapes.size()) {
        detail::invalid_tensor("strides", "got " + std::to_string(strides.size()) + " strides for " +
                                              std::to_string(shapes.size()) + " dimensions");
    }
    t.ndims = static_cast<std::uint8_t>(shapes.size());
    std::copy(shapes.begin(), shapes.end(), t.shapes.begin());
    if (strides.size() != 0) {
        std::copy(strides.begin(), strides.end(), t.strides.begin());
    } else {
        std::uint64_t stride = 1;
        for (std::uint32_t i = t.ndims; i-- > 0;) {
            if (stride > UINT32_MAX) {
                detail::invalid_tensor(indexed("strides", i),
                                       "row-major stride " + std::to_string(stride) + " does not fit in 32 bits");
            }
            t.strides[i] = static_cast<std::uint32_t>(stride);
            stride *= std::max<std::uint32_t>(t.shapes[i], 1);
        }
    }
    validate_tensor(t);
    return t;
}

bool operator==(const Tensor& a, const Tensor& b) noexcept {
    return a.buffer == b.buffer && a.byte_offset == b.byte_offset && a.ndims == b.ndims && a.dtype == b.dtype &&
           a.reserved == b.reserved && a.shapes == b.shapes && a.strides == b.strides;
}

} // namespace canopy
