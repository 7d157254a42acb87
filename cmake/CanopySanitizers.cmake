# CANOPY_SANITIZE builds everything with ASan and UBSan; any UBSan report aborts the test. CANOPY_SANITIZED tells
# the code so (gcc defines __SANITIZE_ADDRESS__ under ASan, clang 14 does not).
if(CANOPY_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  add_compile_definitions(CANOPY_SANITIZED=1)
endif()

# CANOPY_SANITIZE_THREAD builds everything with ThreadSanitizer, which cannot be combined with ASan. CANOPY_TSAN
# tells the code so; tests/tsan.supp names the reports from uninstrumented libraries that TSan cannot see into.
if(CANOPY_SANITIZE_THREAD)
  if(CANOPY_SANITIZE)
    message(FATAL_ERROR "CANOPY_SANITIZE and CANOPY_SANITIZE_THREAD cannot be combined")
  endif()
  add_compile_options(-fsanitize=thread -fno-omit-frame-pointer)
  add_link_options(-fsanitize=thread)
  add_compile_definitions(CANOPY_TSAN=1)
endif()
