#include "protocol/wire_enum.h"

namespace canopy {

const char* to_string(Backend b) noexcept {
    switch (b) {
    case Backend::POSIX_SHM:
        return "posix_shm";
    case Backend::CUDA_VMM:
        return "cuda_vmm";
    case Backend::SIM_VMM:
        return "sim_vmm";
    case Backend::FORK_SHM:
        return "fork_shm";
    case Backend::FORK_COW:
        return "fork_cow";
    }
    return "unknown";
}

const char* to_string(Access a) noexcept {
    switch (a) {
    case Access::READ:
        return "read";
    case Access::WRITE:
        return "write";
    case Access::READWRITE:
        return "readwrite";
    }
    return "unknown";
}

const char* to_string(AddressSpace s) noexcept {
    switch (s) {
    case AddressSpace::HOST:
        return "host";
    case AddressSpace::DEVICE:
        return "device";
    }
    return "unknown";
}

const char* to_string(DataType t) noexcept {
    switch (t) {
    case DataType::FLOAT32:
        return "float32";
    case DataType::FLOAT16:
        return "float16";
    case DataType::BFLOAT16:
        return "bfloat16";
    case DataType::FLOAT64:
        return "float64";
    case DataType::INT8:
        return "int8";
    case DataType::UINT8:
        return "uint8";
    case DataType::INT16:
        return "int16";
    case DataType::INT32:
        return "int32";
    case DataType::INT64:
        return "int64";
    }
    return "unknown";
}

} // namespace canopy
