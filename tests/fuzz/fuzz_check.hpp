// What the fuzz targets share. Each target is a function
// `void fuzz_<name>(const std::uint8_t* data, std::size_t size)` that checks
// properties of one I/O-free piece on any input and aborts (FUZZ_CHECK) when
// one fails. scripts/fuzz builds each with clang's libFuzzer, which calls it
// through LLVMFuzzerTestOneInput (ZKASIO_LIBFUZZER); test_fuzz_corpus runs
// it on every file of the corpus (tests/fuzz/corpus/<name>/), so an input
// that once failed, kept there, is a regression test of the default build.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(condition)                                                          \
  do {                                                                                 \
    if (!(condition)) {                                                                \
      std::fprintf(stderr, "%s:%d: property failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                    \
    }                                                                                  \
  } while (false)

#ifdef ZKASIO_LIBFUZZER
#define ZKASIO_FUZZ_TARGET(function)                                             \
  extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) { \
    function(data, size);                                                        \
    return 0;                                                                    \
  }
#else
#define ZKASIO_FUZZ_TARGET(function)
#endif
