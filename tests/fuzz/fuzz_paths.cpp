// Path validation on any bytes: path_problem never crashes; what it accepts
// is a path the server accepts (starts with '/', no empty, '.' or '..'
// component, no control character, at most 4096 bytes); what it refuses, it
// refuses with a message that names the path.
#include <string>
#include <string_view>
#include <zkasio/operations.hpp>

#include "fuzz/fuzz_check.hpp"

void fuzz_paths(const std::uint8_t* data, std::size_t size) {
  if (size == 0) return;
  bool sequential = data[0] & 1;  // the first byte: a sequential create's path or not
  std::string_view path(reinterpret_cast<const char*>(data + 1), size - 1);
  auto problem = zkasio::path_problem(path, sequential);
  if (!problem.empty()) {
    FUZZ_CHECK(problem.rfind("invalid path '", 0) == 0);
    return;
  }
  FUZZ_CHECK(!path.empty() && path.front() == '/');
  FUZZ_CHECK(path.size() <= 4096);
  FUZZ_CHECK(path.find('\0') == std::string_view::npos);
  for (unsigned char c : path) FUZZ_CHECK(c >= 0x20 && c != 0x7f);
  if (path.size() == 1) return;
  FUZZ_CHECK(sequential || path.back() != '/');
  auto body = sequential && path.back() == '/' ? path.substr(0, path.size() - 1) : path;
  FUZZ_CHECK(body.find("//") == std::string_view::npos);
  FUZZ_CHECK(body.find("/./") == std::string_view::npos && body.find("/../") == std::string_view::npos);
  FUZZ_CHECK(!body.ends_with("/.") && !body.ends_with("/.."));
}

ZKASIO_FUZZ_TARGET(fuzz_paths)
