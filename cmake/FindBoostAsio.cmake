# Finds Boost.Asio (header-only; Boost 1.81 is the version built and tested)
# and presents it as the imported target Asio::asio, so that zkasio's
# `#include <asio/...>` and `asio::` name Boost's: for each public header of
# boost/asio (every one but those of its detail/ and impl/ folders) it writes
# a forwarding header asio/<name> into BoostAsio_SHIM_DIR that includes
# boost/asio/<name> and declares `namespace asio = boost::asio`.
# ZKASIO_BOOST_ASIO=1 tells the code (zkasio::error_code is then
# boost::system::error_code, what Boost.Asio's tokens expect).
# Defines Asio::asio, BoostAsio_VERSION and BoostAsio_SHIM_DIR.
include(${CMAKE_CURRENT_LIST_DIR}/AsioCommon.cmake)
find_path(BoostAsio_INCLUDE_DIR NAMES boost/asio.hpp)
if(BoostAsio_INCLUDE_DIR)
  zkasio_version_of_header("${BoostAsio_INCLUDE_DIR}/boost/version.hpp" BOOST_VERSION BoostAsio_VERSION)
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(BoostAsio REQUIRED_VARS BoostAsio_INCLUDE_DIR VERSION_VAR BoostAsio_VERSION)

if(BoostAsio_FOUND AND NOT TARGET Asio::asio)
  if(NOT BoostAsio_SHIM_DIR)
    set(BoostAsio_SHIM_DIR "${CMAKE_BINARY_DIR}/asio_over_boost")
  endif()
  set(_boost_asio "${BoostAsio_INCLUDE_DIR}/boost/asio")
  file(GLOB_RECURSE _headers RELATIVE "${_boost_asio}" "${_boost_asio}/*.hpp")
  list(FILTER _headers EXCLUDE REGEX "(^|/)(detail|impl)/")  # (reached from Boost's own headers only)
  foreach(_header IN LISTS _headers)
    set(_forward "#pragma once\n#include <boost/asio/${_header}>\nnamespace asio = boost::asio;\n")
    file(CONFIGURE OUTPUT "${BoostAsio_SHIM_DIR}/asio/${_header}" CONTENT "${_forward}" @ONLY)
  endforeach()
  file(CONFIGURE OUTPUT "${BoostAsio_SHIM_DIR}/asio.hpp"
       CONTENT "#pragma once\n#include <boost/asio.hpp>\nnamespace asio = boost::asio;\n" @ONLY)

  find_package(Threads REQUIRED)
  zkasio_aligned_alloc_definition(BOOST_ASIO aligned_alloc_definition)
  # (Not BOOST_ASIO_NO_DEPRECATED: Boost 1.81 keeps experimental::as_tuple
  # and experimental::deferred, Asio 1.22's names, which the tests use, only
  # as deprecated names. zkasio's own code names neither.)
  add_library(Asio::asio INTERFACE IMPORTED)
  set_target_properties(Asio::asio PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${BoostAsio_SHIM_DIR};${BoostAsio_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS "ZKASIO_BOOST_ASIO=1;${aligned_alloc_definition}"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()
mark_as_advanced(BoostAsio_INCLUDE_DIR)
