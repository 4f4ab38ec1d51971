#include <zkasio/operations.hpp>

namespace zkasio {

acl open_acl_unsafe() { return {{perm::all, "world", "anyone"}}; }
acl read_acl_unsafe() { return {{perm::read, "world", "anyone"}}; }
acl creator_all_acl() { return {{perm::all, "auth", ""}}; }
acl creator_all_world_read_acl() { return {{perm::all, "auth", ""}, {perm::read, "world", "anyone"}}; }

std::string path_problem(std::string_view path, bool sequential) {
  auto quoted = [&] {
    std::string q = "'";
    for (unsigned char c : path.substr(0, 200)) {
      if (c < 0x20 || c == 0x7f) {
        static const char hex[] = "0123456789abcdef";
        q += "\\x";
        q += hex[c >> 4];
        q += hex[c & 15];
      } else {
        q += static_cast<char>(c);
      }
    }
    return q + (path.size() > 200 ? "...'" : "'");
  };
  auto bad = [&](const char* why) { return "invalid path " + quoted() + ": " + why; };

  if (path.empty()) return "invalid path '': empty";
  if (path.front() != '/') return bad("must start with '/'");
  if (path.size() > max_path_length)
    return bad(("longer than " + std::to_string(max_path_length) + " bytes").c_str());
  for (std::size_t i = 0; i < path.size(); ++i) {
    auto c = static_cast<unsigned char>(path[i]);
    if (c == 0) return bad("contains a NUL character");
    if (c < 0x20 || c == 0x7f) return bad("contains a control character");
    // U+0080..U+009F (C1 controls) in UTF-8: C2 80..C2 9F; the server rejects them.
    if (c == 0xc2 && i + 1 < path.size()) {
      auto next = static_cast<unsigned char>(path[i + 1]);
      if (next >= 0x80 && next <= 0x9f) return bad("contains a control character");
    }
  }
  if (path.size() == 1) return {};  // the root
  if (path.back() == '/' && !sequential) return bad("ends with '/'");
  std::size_t start = 1;
  while (start <= path.size()) {
    auto end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    auto component = path.substr(start, end - start);
    bool last = end == path.size();
    if (component.empty() && !(last && sequential)) return bad("has an empty component ('//')");
    if (component == "." || component == "..") return bad("has a '.' or '..' component");
    start = end + 1;
  }
  return {};
}

}  // namespace zkasio
