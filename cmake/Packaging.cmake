# The Debian package: every binary, the client library (static) with its
# headers, pkg-config file and CMake package config, the corpus script and the container entry
# point. Built with
#   cpack -G DEB --config build/CPackConfig.cmake -B <output dir>
# into spotps_<version>_amd64.deb. Its Depends come from dpkg-shlibdeps
# (offline: it reads the installed packages' shlibs files), so they name
# exactly the Debian 12 runtime packages the binaries link.

# find_package(spotps CONFIG): spotps::client and its dependencies, under
# <libdir>/cmake/spotps, relocatable (paths follow the files).
include(CMakePackageConfigHelpers)
set(SPOTPS_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/spotps)
install(EXPORT spotpsTargets NAMESPACE spotps:: DESTINATION ${SPOTPS_CMAKE_DIR})
configure_package_config_file(${CMAKE_SOURCE_DIR}/cmake/spotpsConfig.cmake.in
  ${CMAKE_BINARY_DIR}/spotpsConfig.cmake INSTALL_DESTINATION ${SPOTPS_CMAKE_DIR})
write_basic_package_version_file(${CMAKE_BINARY_DIR}/spotpsConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${CMAKE_BINARY_DIR}/spotpsConfig.cmake ${CMAKE_BINARY_DIR}/spotpsConfigVersion.cmake
  DESTINATION ${SPOTPS_CMAKE_DIR})

# The container entry point (deploy/docker/entrypoint.sh): also useful on a
# plain host, and the package test runs it from the unpacked package.
install(PROGRAMS ${CMAKE_SOURCE_DIR}/deploy/docker/entrypoint.sh
  DESTINATION ${CMAKE_INSTALL_DATADIR}/spotps)

set(CPACK_GENERATOR DEB)
set(CPACK_PACKAGE_NAME spotps)
set(CPACK_PACKAGE_VERSION ${PROJECT_VERSION})
set(CPACK_PACKAGE_VENDOR spotps)
set(CPACK_PACKAGE_CONTACT "spotps maintainers <spotps@localhost>")
set(CPACK_PACKAGE_DESCRIPTION_SUMMARY
  "parameter server for training transformers on CPUs with preemptible workers")
set(CPACK_PACKAGE_DESCRIPTION
  "spotps-ps (parameter-server shard), spotps-trainer (elastic BF16 trainer),
spotps-generate, spotps-tokenize, spotps-ctl, spotps-client-example, the
static client library with its headers (include/spotps), pkg-config file and
CMake package config (find_package(spotps CONFIG): spotps::client).")
set(CPACK_PACKAGING_INSTALL_PREFIX /usr)
set(CPACK_DEBIAN_FILE_NAME DEB-DEFAULT)
set(CPACK_DEBIAN_PACKAGE_SECTION science)
set(CPACK_DEBIAN_PACKAGE_PRIORITY optional)
set(CPACK_DEBIAN_PACKAGE_SHLIBDEPS ON)
# The trainer loads OpenBLAS's thread controls when present, and the corpus
# script needs bible-kjv; neither is linked.
set(CPACK_DEBIAN_PACKAGE_RECOMMENDS "libopenblas0-pthread, bible-kjv")
# To build against the client library.
set(CPACK_DEBIAN_PACKAGE_SUGGESTS "libgrpc++-dev, libprotobuf-dev, libabsl-dev, libdnnl-dev, pkg-config")
set(CPACK_STRIP_FILES ON)
include(CPack)
