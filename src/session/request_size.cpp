#include "request_size.hpp"

namespace zkasio::detail {

namespace {
// jute's encodings: int 4 bytes, string and buffer 4 + length, vector 4 + items.
std::size_t bytes_of(std::string_view s) { return 4 + s.size(); }
std::size_t bytes_of(const acl& a) {
  std::size_t n = 4;
  for (const auto& e : a) n += 4 + bytes_of(e.scheme) + bytes_of(e.id);
  return n;
}
}  // namespace

std::size_t create_request_size(std::string_view path, std::string_view data, const acl& access) {
  return bytes_of(path) + bytes_of(data) + bytes_of(access) + 4;
}

std::size_t set_data_request_size(std::string_view path, std::string_view data) {
  return bytes_of(path) + bytes_of(data) + 4;
}

std::size_t request_size(const multi_op& op) {
  return std::visit(
      [](const auto& o) -> std::size_t {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, op::create>)
          return create_request_size(o.path, o.data, o.options.access);
        else if constexpr (std::is_same_v<T, op::set_data>)
          return set_data_request_size(o.path, o.data);
        else
          return bytes_of(o.path) + 4;  // check, remove: path + version
      },
      op);
}

}  // namespace zkasio::detail
