# Installs headers, the library and a CMake package, so that a user's project
# can do find_package(zkasio) and link zkasio::zkasio.
include(CMakePackageConfigHelpers)

set(ZKASIO_CMAKE_DIR "${CMAKE_INSTALL_LIBDIR}/cmake/zkasio")

install(TARGETS zkasio EXPORT zkasioTargets
  ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(DIRECTORY include/zkasio DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(EXPORT zkasioTargets NAMESPACE zkasio:: DESTINATION ${ZKASIO_CMAKE_DIR})

configure_package_config_file(cmake/zkasioConfig.cmake.in
  "${PROJECT_BINARY_DIR}/zkasioConfig.cmake" INSTALL_DESTINATION ${ZKASIO_CMAKE_DIR})
write_basic_package_version_file("${PROJECT_BINARY_DIR}/zkasioConfigVersion.cmake"
  COMPATIBILITY SameMinorVersion)
# Neither Asio nor the C client ships a CMake config: the package brings the
# find modules it needs.
install(FILES
  "${PROJECT_BINARY_DIR}/zkasioConfig.cmake"
  "${PROJECT_BINARY_DIR}/zkasioConfigVersion.cmake"
  cmake/FindAsio.cmake
  cmake/FindBoostAsio.cmake
  cmake/AsioCommon.cmake
  cmake/FindZooKeeperC.cmake
  DESTINATION ${ZKASIO_CMAKE_DIR})
