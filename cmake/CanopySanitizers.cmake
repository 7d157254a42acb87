# CANOPY_SANITIZE builds everything with ASan and UBSan; any UBSan report aborts the test. CANOPY_SANITIZED tells
# the code so (gcc defines __SANITIZE_ADDRESS__ under ASan, clang 14 does not).
if(CANOPY_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
  add_compile_definitions(CANOPY_SANITIZED=1)
endif()
