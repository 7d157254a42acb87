# CANOPY_SANITIZE builds everything with ASan and UBSan; any UBSan report aborts the test.
if(CANOPY_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-sanitize-recover=all -fno-omit-frame-pointer)
  add_link_options(-fsanitize=address,undefined)
endif()
