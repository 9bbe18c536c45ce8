# What an installed dlaunch brings besides the binaries, and the Debian package
# (`cpack`, which scripts/package.sh runs).
#
# The man page and the bash completion are made at build time by dlaunch-docgen
# from the flag table that parses the command line and prints --help
# (launcher/config/flag_table.hpp), so that they cannot drift from it.
include(GNUInstallDirs)

set(docgen_dir ${PROJECT_BINARY_DIR}/generated)
set(man_page ${docgen_dir}/dlaunch.1)
set(completion ${docgen_dir}/dlaunch.bash-completion)
find_program(DLAUNCH_GZIP gzip)
# Debian installs man pages gzipped (-n: no name or time stamp, so the bytes
# depend on the text alone); man reads either.
if(DLAUNCH_GZIP)
  set(man_installed ${man_page}.gz)
  set(gzip_man COMMAND ${DLAUNCH_GZIP} -9nkf ${man_page})
else()
  set(man_installed ${man_page})
  set(gzip_man)
endif()
add_custom_command(OUTPUT ${man_installed} ${completion}
  COMMAND dlaunch-docgen man ${PROJECT_VERSION} ${man_page}
  ${gzip_man}
  COMMAND dlaunch-docgen completion ${completion}
  DEPENDS dlaunch-docgen
  COMMENT "Writing the man page and the bash completion from the flag table" VERBATIM)
add_custom_target(dlaunch_docs ALL DEPENDS ${man_installed} ${completion})

install(FILES ${man_installed} DESTINATION ${CMAKE_INSTALL_MANDIR}/man1)
install(FILES ${completion} DESTINATION ${CMAKE_INSTALL_DATADIR}/bash-completion/completions RENAME dlaunch)
# The repository has no licence file; cmake/copyright says so rather than
# inventing one. The guides go to docs/ beside the README, where its links
# point.
install(FILES README.md cmake/copyright DESTINATION ${CMAKE_INSTALL_DOCDIR})
file(GLOB guides CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/docs/*.md)
install(FILES ${guides} docs/events.schema.json DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)

# CPack's DEB generator rather than debian/ and dpkg-buildpackage: the package
# is the CMake install tree as it is, one binary package, and CPack builds it
# from the build directory that the tests already use, without a second build
# (dpkg-buildpackage would configure and compile a tree of its own, minutes on
# 2 cores, and want debhelper). Depends is still dpkg's own: with SHLIBDEPS,
# CPack runs dpkg-shlibdeps on every binary in the package.
set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME dlaunch)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_STRIP_FILES ON)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)  # dlaunch_VERSION_ARCH.deb
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
set(CPACK_DEBIAN_PACKAGE_SECTION utils)
set(CPACK_DEBIAN_PACKAGE_CONTROL_STRICT_PERMISSION ON)
set(DLAUNCH_MAINTAINER "dlaunch maintainers <dlaunch@localhost>" CACHE STRING "The Debian package's Maintainer field")
set(CPACK_DEBIAN_PACKAGE_MAINTAINER "${DLAUNCH_MAINTAINER}")
# What dlaunch runs only when asked to (a head launch over ssh or pdsh, stacks
# of native workers, mpirun, Python workers): none is needed to install or run
# it, so none is a dependency, and no test tool comes with the package.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "openssh-client, pdsh, gdb, openmpi-bin, python3")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY "native launcher for distributed training (torchrun and mpirun in one binary)")
# CPack puts the summary first, as the synopsis line.
set(CPACK_DEBIAN_PACKAGE_DESCRIPTION "dlaunch starts N worker processes on a node, gives each the variables PyTorch,
Open MPI, Azure ML, TensorFlow and Horovod expect, supervises them, and stops
the whole job with the real exit code and the root cause when one fails. It
takes torchrun's flags, runs across nodes through an authenticated rendezvous,
from a head node over ssh, or under mpirun and Slurm.")
include(CPack)
