#pragma once
// The CUDA driver API's handle and value types, and the few constants canopy passes to it.
//
// With the CUDA Toolkit at build time (CANOPY_HAVE_CUDA_TOOLKIT=1) these are the types of <cuda.h>, and
// driver.cpp checks every entry point of DriverApi against the toolkit's prototype. Without it they are
// layout-identical stand-ins, so canopy builds and runs CPU-only topologies on a machine that has neither the
// toolkit nor the driver. Either way nothing here links against libcuda: the driver is opened with dlopen.
//
// Including <cuda.h> also brings its renaming macros (cuMemAlloc -> cuMemAlloc_v2, ...). They apply alike to
// DriverApi's members and to every use of them, so code reads the base names throughout.
//
// Thread safety: types and constants only.

#include <cstdint>

#if CANOPY_HAVE_CUDA_TOOLKIT
#include <cuda.h>
#endif

namespace canopy::cuda {

#if CANOPY_HAVE_CUDA_TOOLKIT
using CuStatus = CUresult; // what entry points return; CuResult (driver.h) is the int it is reported as
using CuDevice = CUdevice;
using CuContext = CUcontext;
using CuStream = CUstream;
using CuEvent = CUevent;
using CuModule = CUmodule;
using CuFunction = CUfunction;
using CuDevicePtr = CUdeviceptr;
using CuDeviceAttribute = CUdevice_attribute;
using CuJitOption = CUjit_option;
using CuFunctionAttribute = CUfunction_attribute;
using CuMemHandle = CUmemGenericAllocationHandle;
using CuMemAllocationProp = CUmemAllocationProp;
using CuMemAccessDesc = CUmemAccessDesc;
using CuMemHandleType = CUmemAllocationHandleType;
using CuMemGranularityFlags = CUmemAllocationGranularity_flags;
#else
using CuStatus = int;
using CuDevice = int;
using CuContext = struct CUctx_st*;
using CuStream = struct CUstream_st*;
using CuEvent = struct CUevent_st*;
using CuModule = struct CUmod_st*;
using CuFunction = struct CUfunc_st*;
using CuDevicePtr = unsigned long long;
using CuDeviceAttribute = int;
using CuJitOption = int;
using CuFunctionAttribute = int;
using CuMemHandle = unsigned long long;
struct CuMemLocation {
    int type;
    int id;
};
struct CuMemAllocationProp {
    int type;
    int requestedHandleTypes;
    CuMemLocation location;
    void* win32HandleMetaData;
    struct {
        unsigned char compressionType;
        unsigned char gpuDirectRDMACapable;
        unsigned short usage;
        unsigned char reserved[4];
    } allocFlags;
};
struct CuMemAccessDesc {
    CuMemLocation location;
    int flags;
};
using CuMemHandleType = int;
using CuMemGranularityFlags = int;
#endif

static_assert(sizeof(CuDevicePtr) == 8, "canopy needs 64-bit device pointers");

// Values of the driver API that canopy uses, spelled here so that they exist without the toolkit. driver.cpp
// checks each against <cuda.h> when the toolkit is present.
inline constexpr unsigned int STREAM_NON_BLOCKING = 0x1;      // CU_STREAM_NON_BLOCKING
inline constexpr unsigned int EVENT_BLOCKING_SYNC = 0x1;      // CU_EVENT_BLOCKING_SYNC
inline constexpr unsigned int EVENT_DISABLE_TIMING = 0x2;     // CU_EVENT_DISABLE_TIMING
inline constexpr unsigned int HOST_REGISTER_DEVICEMAP = 0x02; // CU_MEMHOSTREGISTER_DEVICEMAP
inline constexpr unsigned int HOST_REGISTER_READ_ONLY = 0x08; // CU_MEMHOSTREGISTER_READ_ONLY
inline constexpr int ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75; // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR
inline constexpr int ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76; // CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR
inline constexpr int ATTRIBUTE_READ_ONLY_HOST_REGISTER_SUPPORTED = 113;
// User modules (worker/cuda/user_modules.h): JIT logs, kernel limits.
inline constexpr int ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97; // CU_DEVICE_ATTRIBUTE_..._OPTIN
inline constexpr int JIT_INFO_LOG_BUFFER = 3;                          // CU_JIT_INFO_LOG_BUFFER
inline constexpr int JIT_INFO_LOG_BUFFER_SIZE_BYTES = 4;               // CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES
inline constexpr int JIT_ERROR_LOG_BUFFER = 5;                         // CU_JIT_ERROR_LOG_BUFFER
inline constexpr int JIT_ERROR_LOG_BUFFER_SIZE_BYTES = 6;              // CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES
inline constexpr int FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0;         // CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK
inline constexpr int FUNC_ATTRIBUTE_SHARED_SIZE_BYTES = 1;             // CU_FUNC_ATTRIBUTE_SHARED_SIZE_BYTES
inline constexpr int FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8; // CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_...
// Virtual memory management (CUDA_VMM buffers).
inline constexpr int MEM_ALLOCATION_TYPE_PINNED = 1;            // CU_MEM_ALLOCATION_TYPE_PINNED
inline constexpr int MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR = 1; // CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR
inline constexpr int MEM_LOCATION_TYPE_DEVICE = 1;              // CU_MEM_LOCATION_TYPE_DEVICE
inline constexpr int MEM_ACCESS_FLAGS_PROT_READ = 1;            // CU_MEM_ACCESS_FLAGS_PROT_READ
inline constexpr int MEM_ACCESS_FLAGS_PROT_READWRITE = 3;       // CU_MEM_ACCESS_FLAGS_PROT_READWRITE
inline constexpr int MEM_ALLOC_GRANULARITY_RECOMMENDED = 1;     // CU_MEM_ALLOC_GRANULARITY_RECOMMENDED

// CUresult values canopy tells apart (the rest are reported by name only).
inline constexpr int ERROR_INVALID_VALUE = 1;
inline constexpr int ERROR_NOT_SUPPORTED = 801;
inline constexpr int ERROR_NO_DEVICE = 100;
inline constexpr int ERROR_NOT_FOUND = 500;
inline constexpr int ERROR_NOT_READY = 600;
inline constexpr int ERROR_ECC_UNCORRECTABLE = 214;
inline constexpr int ERROR_NVLINK_UNCORRECTABLE = 220;
inline constexpr int ERROR_CONTAINED = 226;
inline constexpr int ERROR_ILLEGAL_ADDRESS = 700;
inline constexpr int ERROR_LAUNCH_TIMEOUT = 702;
inline constexpr int ERROR_CONTEXT_IS_DESTROYED = 709;
inline constexpr int ERROR_ASSERT = 710;
inline constexpr int ERROR_HARDWARE_STACK_ERROR = 714;
inline constexpr int ERROR_ILLEGAL_INSTRUCTION = 715;
inline constexpr int ERROR_MISALIGNED_ADDRESS = 716;
inline constexpr int ERROR_INVALID_ADDRESS_SPACE = 717;
inline constexpr int ERROR_INVALID_PC = 718;
inline constexpr int ERROR_LAUNCH_FAILED = 719;
inline constexpr int ERROR_EXTERNAL_DEVICE = 911;
inline constexpr int ERROR_UNKNOWN = 999;

} // namespace canopy::cuda
