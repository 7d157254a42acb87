# canopy_test_module: tests/cuda/user_module.cu as PTX text (nvcc -ptx, compute_90), embedded in an object
# library that defines canopy::testing::user_module_ptx(). Without the CUDA Toolkit the text is empty and the
# tests and the benchmark that need it skip. Included by tests/cuda and tests/bench.
if(NOT TARGET canopy_test_module)
  set(canopy_test_module_dir ${PROJECT_BINARY_DIR}/tests/user_module)
  if(CANOPY_HAVE_CUDA_TOOLKIT)
    set(canopy_test_ptx ${canopy_test_module_dir}/user_module.ptx)
    set(canopy_test_ptx_cpp ${canopy_test_module_dir}/user_module_ptx.cpp)
    add_custom_command(
      OUTPUT ${canopy_test_ptx}
      COMMAND ${CMAKE_COMMAND} -E make_directory ${canopy_test_module_dir}
      COMMAND ${CUDAToolkit_NVCC_EXECUTABLE} -O3 -arch=compute_90 --Werror all-warnings -ptx -o ${canopy_test_ptx}
              ${PROJECT_SOURCE_DIR}/tests/cuda/user_module.cu
      DEPENDS ${PROJECT_SOURCE_DIR}/tests/cuda/user_module.cu
      COMMENT "nvcc -ptx: tests/cuda/user_module.cu"
      VERBATIM)
    add_custom_command(
      OUTPUT ${canopy_test_ptx_cpp}
      COMMAND ${CMAKE_COMMAND} -DINPUT=${canopy_test_ptx} -DOUTPUT=${canopy_test_ptx_cpp} -DNAMESPACE=canopy::testing
              -DFUNCTION=user_module_ptx -P ${PROJECT_SOURCE_DIR}/tests/cuda/embed_text.cmake
      DEPENDS ${canopy_test_ptx} ${PROJECT_SOURCE_DIR}/tests/cuda/embed_text.cmake
      COMMENT "embedding user_module.ptx"
      VERBATIM)
    add_library(canopy_test_module OBJECT ${canopy_test_ptx_cpp})
  else()
    add_library(canopy_test_module OBJECT ${PROJECT_SOURCE_DIR}/tests/cuda/user_module_none.cpp)
  endif()
  canopy_target_warnings(canopy_test_module)
endif()
