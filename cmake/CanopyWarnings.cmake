# Warnings as errors for canopy's own targets; third-party headers come in as SYSTEM.
function(canopy_target_warnings target)
  target_compile_options(${target} PRIVATE -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wsign-conversion
                                           -Wnon-virtual-dtor -Wold-style-cast -Wcast-align -Woverloaded-virtual
                                           -Wimplicit-fallthrough -Werror)
endfunction()
