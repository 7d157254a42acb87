# What `cmake --install` puts where (GNUInstallDirs under CMAKE_INSTALL_PREFIX, /usr/local by default):
#   bin/canopyd, bin/canopy                       stripped with `cmake --install --strip`
#   lib/systemd/system/canopyd.service            the unit, its paths pointing at the installed bin/ and doc dir
#   share/man/man1/canopy.1, share/man/man8/canopyd.8
#   share/bash-completion/completions/canopy
#   share/doc/canopy/README.md, share/doc/canopy/*.md (docs/), share/doc/canopy/examples/*.json
#   include/canopy/, lib/libcanopy_*.a, lib/cmake/canopy/, lib/pkgconfig/canopy-client.pc: the C++ client library
# The Debian package (cmake/CanopyPackage.cmake) adds /etc/canopy/canopy.json and the maintainer scripts.
include(GNUInstallDirs)

install(TARGETS canopyd canopy RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The unit is written when the install runs, not when the build is configured: its paths follow the prefix
# of that install, so `cmake --install --prefix P` gets P/bin/canopyd and cpack's /usr gets /usr/bin/canopyd.
install(CODE "set(canopy_unit_source [[${PROJECT_SOURCE_DIR}/scripts/canopyd.service]])
set(canopy_unit_bindir [[${CMAKE_INSTALL_BINDIR}]])
set(canopy_unit_docdir [[${CMAKE_INSTALL_DOCDIR}]])
include([[${PROJECT_SOURCE_DIR}/cmake/CanopyInstallUnit.cmake]])")

install(FILES ${PROJECT_SOURCE_DIR}/docs/man/canopy.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${PROJECT_SOURCE_DIR}/docs/man/canopyd.8 DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES ${PROJECT_SOURCE_DIR}/scripts/completion/canopy.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME canopy)
file(GLOB canopy_docs ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${PROJECT_SOURCE_DIR}/README.md ${canopy_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR})
file(GLOB canopy_examples ${PROJECT_SOURCE_DIR}/config/examples/*.json ${PROJECT_SOURCE_DIR}/docs/examples/*.json)
install(FILES ${canopy_examples} DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)

# The C++ client library (client/): lib/libcanopy_client.a and the two libraries it is made of, its public headers
# under include/canopy (a consumer puts include/canopy on its include path and writes #include
# "client/canopy_client.h"), a CMake package (find_package(canopy) gives the target canopy::client) and a pkg-config
# file (pkg-config --cflags --libs canopy-client). Both are relocatable: they find the prefix from where they lie.
install(TARGETS canopy_client canopy_protocol canopy_ipc EXPORT canopyTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/canopy)
file(GLOB canopy_client_headers ${PROJECT_SOURCE_DIR}/client/*.h)
install(FILES ${canopy_client_headers} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/canopy/client)
install(FILES ${PROJECT_SOURCE_DIR}/protocol/error.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/canopy/protocol)
install(FILES ${PROJECT_SOURCE_DIR}/ipc/unique_fd.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/canopy/ipc)
install(EXPORT canopyTargets NAMESPACE canopy:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/canopy)
include(CMakePackageConfigHelpers)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/canopyConfig.cmake.in
                              ${PROJECT_BINARY_DIR}/canopyConfig.cmake
                              INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/canopy)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/canopyConfigVersion.cmake COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/canopyConfig.cmake ${PROJECT_BINARY_DIR}/canopyConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/canopy)
# The prefix as seen from the .pc file's directory (../.. for lib/pkgconfig).
file(RELATIVE_PATH canopy_pc_prefix "/${CMAKE_INSTALL_LIBDIR}/pkgconfig" "/")
configure_file(${PROJECT_SOURCE_DIR}/cmake/canopy-client.pc.in ${PROJECT_BINARY_DIR}/canopy-client.pc @ONLY)
install(FILES ${PROJECT_BINARY_DIR}/canopy-client.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
