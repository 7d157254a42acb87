# What `cmake --install` puts where (GNUInstallDirs under CMAKE_INSTALL_PREFIX, /usr/local by default):
#   bin/canopyd, bin/canopy                       stripped with `cmake --install --strip`
#   lib/systemd/system/canopyd.service            the unit, its paths pointing at this prefix's bin/
#   share/man/man1/canopy.1, share/man/man8/canopyd.8
#   share/bash-completion/completions/canopy
#   share/doc/canopy/*.md, share/doc/canopy/examples/*.json
include(GNUInstallDirs)

install(TARGETS canopyd canopy RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})

# The unit names /usr/local/bin (the default prefix); a build configured for another CMAKE_INSTALL_PREFIX
# (a package's /usr) gets that prefix's bin directory. `cmake --install --prefix` does not rewrite it.
file(READ ${PROJECT_SOURCE_DIR}/scripts/canopyd.service canopy_unit)
string(REPLACE "/usr/local/bin/" "${CMAKE_INSTALL_FULL_BINDIR}/" canopy_unit "${canopy_unit}")
file(WRITE ${PROJECT_BINARY_DIR}/canopyd.service "${canopy_unit}")
install(FILES ${PROJECT_BINARY_DIR}/canopyd.service DESTINATION lib/systemd/system)

install(FILES ${PROJECT_SOURCE_DIR}/docs/man/canopy.1 DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${PROJECT_SOURCE_DIR}/docs/man/canopyd.8 DESTINATION ${CMAKE_INSTALL_MANDIR}/man8)
install(FILES ${PROJECT_SOURCE_DIR}/scripts/completion/canopy.bash
        DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME canopy)
file(GLOB canopy_docs ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${canopy_docs} DESTINATION ${CMAKE_INSTALL_DOCDIR})
file(GLOB canopy_examples ${PROJECT_SOURCE_DIR}/config/examples/*.json ${PROJECT_SOURCE_DIR}/docs/examples/*.json)
install(FILES ${canopy_examples} DESTINATION ${CMAKE_INSTALL_DOCDIR}/examples)
