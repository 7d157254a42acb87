# Runs inside an install (`cmake --install`, cpack), from the install(CODE) in CanopyInstall.cmake: writes
# scripts/canopyd.service to lib/systemd/system under the prefix being installed to, with the unit's
# /usr/local/bin/ and /usr/local/share/doc/canopy/ replaced by that prefix's bin and doc directories.
# In: canopy_unit_source, canopy_unit_bindir and canopy_unit_docdir (GNUInstallDirs values, relative to the
# prefix or absolute), and CMAKE_INSTALL_PREFIX and DESTDIR as the install sets them. The text goes straight
# to its destination, so that two installs of one build at once (a test's and cpack's) share no file.

foreach(dir bindir docdir)
  if(IS_ABSOLUTE "${canopy_unit_${dir}}")
    set(canopy_unit_full_${dir} "${canopy_unit_${dir}}")
  else()
    set(canopy_unit_full_${dir} "${CMAKE_INSTALL_PREFIX}/${canopy_unit_${dir}}")
  endif()
endforeach()

file(READ "${canopy_unit_source}" canopy_unit)
string(REPLACE "/usr/local/bin/" "${canopy_unit_full_bindir}/" canopy_unit "${canopy_unit}")
string(REPLACE "/usr/local/share/doc/canopy/" "${canopy_unit_full_docdir}/" canopy_unit "${canopy_unit}")

set(canopy_unit_path "$ENV{DESTDIR}${CMAKE_INSTALL_PREFIX}/lib/systemd/system/canopyd.service")
message(STATUS "Installing: ${canopy_unit_path}")
file(WRITE "${canopy_unit_path}" "${canopy_unit}")
file(CHMOD "${canopy_unit_path}" PERMISSIONS OWNER_READ OWNER_WRITE GROUP_READ WORLD_READ)
list(APPEND CMAKE_INSTALL_MANIFEST_FILES "${canopy_unit_path}")
