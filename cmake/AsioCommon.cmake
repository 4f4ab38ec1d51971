# What FindAsio.cmake and FindBoostAsio.cmake share: Asio's and Boost's
# version macros have one encoding (major * 100000 + minor * 100 + patch),
# and one choice of aligned_alloc must hold for every file.
include_guard(GLOBAL)

# Sets OUT to the "major.minor.patch" of `#define MACRO NNNNNN` in HEADER, if there.
function(zkasio_version_of_header header macro out)
  if(NOT EXISTS "${header}")
    return()
  endif()
  file(STRINGS "${header}" line REGEX "^#define ${macro} [0-9]+")
  string(REGEX REPLACE "^#define ${macro} ([0-9]+).*" "\\1" number "${line}")
  math(EXPR major "${number} / 100000")
  math(EXPR minor "${number} / 100 % 1000")
  math(EXPR patch "${number} % 100")
  set(${out} "${major}.${minor}.${patch}" PARENT_SCOPE)
endfunction()

# Asio decides between aligned_alloc and operator new by whether a standard
# header was included before its own: a file that includes Asio first would
# free with one what another allocated with the other (its recycling
# allocator is shared). Sets OUT to the definition that decides once for
# every file, for Asio's macros of PREFIX (ASIO or BOOST_ASIO).
function(zkasio_aligned_alloc_definition prefix out)
  include(CheckCXXSymbolExists)
  check_cxx_symbol_exists(aligned_alloc "cstdlib" ZKASIO_HAVE_ALIGNED_ALLOC)
  if(ZKASIO_HAVE_ALIGNED_ALLOC)
    set(${out} ${prefix}_HAS_STD_ALIGNED_ALLOC=1 PARENT_SCOPE)
  else()
    set(${out} ${prefix}_DISABLE_STD_ALIGNED_ALLOC=1 PARENT_SCOPE)
  endif()
endfunction()
