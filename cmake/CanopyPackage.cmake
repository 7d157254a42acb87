# The Debian package `canopy`, built by CPack from this build directory:
#   cpack -G DEB                 (or `ninja package`, which builds everything first)
# It holds what `cmake --install` installs (cmake/CanopyInstall.cmake), under /usr whatever
# CMAKE_INSTALL_PREFIX says, and besides that:
#   /etc/canopy/canopy.json      a conffile: packaging/deb/canopy.json, a topology without GPUs
#   postinst, prerm, postrm      the canopy user and the unit's enable, start and stop (packaging/deb/)
# Depends is computed by dpkg-shlibdeps from the binaries, plus adduser, which postinst runs. docs/operations.md
# ("The Debian package") says what installing it does.

set(CANOPY_PACKAGE_MAINTAINER "canopy maintainers <maintainers@users.noreply.a-seed-7db4aaa1.example>"
    CACHE STRING "Maintainer field of the Debian package")

# Installed only into packages: `cmake --install` of a source build leaves /etc alone.
install(FILES ${PROJECT_SOURCE_DIR}/packaging/deb/canopy.json DESTINATION /etc/canopy COMPONENT deb
        EXCLUDE_FROM_ALL)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME canopy)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_CONTACT "${CANOPY_PACKAGE_MAINTAINER}")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "task daemon for GPU hosts")
# The install of every default component (ALL), then the package-only one.
set(CPACK_INSTALL_CMAKE_PROJECTS "${PROJECT_BINARY_DIR};canopy;ALL;/;${PROJECT_BINARY_DIR};canopy;deb;/")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_SOURCE_GENERATOR TGZ)

set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT) # canopy_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_SECTION admin)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
# The long description; the first line of the field is CPACK_PACKAGE_DESCRIPTION_SUMMARY.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "canopyd owns the machine's GPUs: it forks one worker process per GPU, CPU
workers and nested supervisors, restarts the ones that die, and runs the tasks
that users submit with the canopy command over a Unix socket. Tasks name their
data as typed, strided views over shared buffers, checked before any CPU or GPU
touches memory through them.
.
The package runs canopyd as the system user canopy under systemd, with a
configuration in /etc/canopy/canopy.json that needs no GPU.")
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_DEPENDS adduser)
set(CPACK_DEBIAN_PACKAGE_CONTROL_EXTRA ${PROJECT_SOURCE_DIR}/packaging/deb/conffiles
                                       ${PROJECT_SOURCE_DIR}/packaging/deb/postinst
                                       ${PROJECT_SOURCE_DIR}/packaging/deb/prerm ${PROJECT_SOURCE_DIR}/packaging/deb/postrm)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)

include(CPack)
