# Finds standalone (non-Boost) Asio, which ships no CMake config.
# Defines the imported target Asio::asio and Asio_VERSION.
find_path(Asio_INCLUDE_DIR NAMES asio.hpp)
if(Asio_INCLUDE_DIR AND EXISTS "${Asio_INCLUDE_DIR}/asio/version.hpp")
  file(STRINGS "${Asio_INCLUDE_DIR}/asio/version.hpp" _asio_version_line REGEX "^#define ASIO_VERSION [0-9]+")
  string(REGEX REPLACE "^#define ASIO_VERSION ([0-9]+).*" "\\1" _asio_version "${_asio_version_line}")
  math(EXPR _asio_major "${_asio_version} / 100000")
  math(EXPR _asio_minor "${_asio_version} / 100 % 1000")
  math(EXPR _asio_patch "${_asio_version} % 100")
  set(Asio_VERSION "${_asio_major}.${_asio_minor}.${_asio_patch}")
endif()

include(FindPackageHandleStandardArgs)
find_package_handle_standard_args(Asio REQUIRED_VARS Asio_INCLUDE_DIR VERSION_VAR Asio_VERSION)

if(Asio_FOUND AND NOT TARGET Asio::asio)
  find_package(Threads REQUIRED)
  # Asio decides between aligned_alloc and operator new by whether a standard
  # header was included before its own: a file that includes Asio first would
  # free with one what another allocated with the other (its recycling
  # allocator is shared). Decide once for every file.
  include(CheckCXXSymbolExists)
  check_cxx_symbol_exists(aligned_alloc "cstdlib" Asio_HAVE_ALIGNED_ALLOC)
  set(_asio_definitions ASIO_STANDALONE ASIO_NO_DEPRECATED)
  if(Asio_HAVE_ALIGNED_ALLOC)
    list(APPEND _asio_definitions ASIO_HAS_STD_ALIGNED_ALLOC=1)
  else()
    list(APPEND _asio_definitions ASIO_DISABLE_STD_ALIGNED_ALLOC=1)
  endif()
  add_library(Asio::asio INTERFACE IMPORTED)
  set_target_properties(Asio::asio PROPERTIES
    INTERFACE_INCLUDE_DIRECTORIES "${Asio_INCLUDE_DIR}"
    INTERFACE_COMPILE_DEFINITIONS "${_asio_definitions}"
    INTERFACE_LINK_LIBRARIES Threads::Threads)
endif()
mark_as_advanced(Asio_INCLUDE_DIR)
