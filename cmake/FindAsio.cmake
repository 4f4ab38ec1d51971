# Finds standalone (non-Boost) Asio, which ships no CMake config.
# Defines the imported target Asio::asio and Asio_VERSION.
include(${CMAKE_CURRENT_LIST_DIR}/AsioCommon.cmake)
find_path(Asio_INCLUDE_DIR NAMES asio.hpp)
if(Asio_INCLUDE_DIR)
  zkasio_version_of_header("${Asio_INCLUDE_DIR}/asio/version.hpp" ASIO_VERSION Asio_VERSION)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Asio REQUIRED_VARS Asio_INCLUDE_DIR VERSION_VAR Asio_VERSION)

if(Asio_FOUND AND NOT TARGET Asio::asio)
  find_package(Threads REQUIRED)
  zkasio_aligned_alloc_definition(ASIO aligned_alloc_definition)
  add_library(Asio::asio INTERFACE IMPORTED)
  set_target_properties(Asio::asio PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${Asio_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS "ASIO_STANDALONE;ASIO_NO_DEPRECATED;${aligned_alloc_definition}"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()
mark_as_advanced(Asio_INCLUDE_DIR)
