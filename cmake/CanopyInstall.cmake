# What `cmake --install` puts where (GNUInstallDirs under CMAKE_INSTALL_PREFIX, /usr/local by default):
#   bin/canopyd, bin/canopy                       stripped with `cmake --install --strip`
#   lib/systemd/system/canopyd.service            the unit, its paths pointing at the installed bin/ and doc dir
#   share/man/man1/canopy.1, share/man/man8/canopyd.8
#   share/bash-completion/completions/canopy
#   share/doc/canopy/README.md, share/doc/canopy/*.md (docs/), share/doc/canopy/examples/*.json
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
