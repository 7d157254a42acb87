#pragma once
// Host-side stand-ins for the tests that build device views, launch plans and kernel calls in this process: a
// buffer descriptor that names no shared memory, and every dtype. Header-only; test code only.

#include "protocol/protocol.h"

#include <cstdint>
#include <vector>

namespace canopy::testing {

// A posix_shm descriptor of `nbytes` under a fresh owner; nothing is created or mapped.
inline BufferDescriptor fake_buffer(std::uint64_t nbytes) {
    CanonicalIdentity id{};
    id.owner_instance = draw_owner_instance();
    id.buffer_id = 1;
    id.generation = 1;
    return make_posix_shm_descriptor(id, nbytes, Access::READWRITE, "cnpy-test");
}

inline const std::vector<DataType>& all_dtypes() {
    static const std::vector<DataType> dtypes{DataType::FLOAT32,  DataType::FLOAT64, DataType::FLOAT16,
                                              DataType::BFLOAT16, DataType::INT8,    DataType::UINT8,
                                              DataType::INT16,    DataType::INT32,   DataType::INT64};
    return dtypes;
}

} // namespace canopy::testing
