# The CUDA Toolkit is optional at build time. The driver itself is always loaded at run time
# (dlopen), so every binary starts on a machine without an NVIDIA driver.
set(CUDAToolkit_ROOT "/usr/local/cuda" CACHE PATH "CUDA Toolkit location")
find_package(CUDAToolkit QUIET)
if(CUDAToolkit_FOUND)
  set(CANOPY_HAVE_CUDA_TOOLKIT ON)
  message(STATUS "canopy: CUDA Toolkit ${CUDAToolkit_VERSION} found at ${CUDAToolkit_BIN_DIR}: CUDA parts on")
else()
  set(CANOPY_HAVE_CUDA_TOOLKIT OFF)
  message(STATUS "canopy: CUDA Toolkit not found (looked in ${CUDAToolkit_ROOT}): CUDA parts off; sim chips only")
endif()
