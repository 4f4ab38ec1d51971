#include <zkasio/operations.hpp>
#include <zkasio/session_options.hpp>

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

namespace {
// jute's encodings: int 4 bytes, string and buffer 4 + length, vector 4 + items.
std::size_t bytes_of(const std::string& s) { return 4 + s.size(); }
std::size_t bytes_of(const acl& a) {
  std::size_t n = 4;
  for (const auto& e : a) n += 4 + bytes_of(e.scheme) + bytes_of(e.id);
  return n;
}
}  // namespace

std::size_t request_size(const multi_op& op) {
  return std::visit(
      [](const auto& o) -> std::size_t {
        using T = std::decay_t<decltype(o)>;
        if constexpr (std::is_same_v<T, op::create>)
          return bytes_of(o.path) + bytes_of(o.data) + bytes_of(o.options.access) + 4;
        else if constexpr (std::is_same_v<T, op::set_data>)
          return bytes_of(o.path) + bytes_of(o.data) + 4;
        else
          return bytes_of(o.path) + 4;  // check, remove: path + version
      },
      op);
}

const char* to_string(session_state state) noexcept {
  switch (state) {
    case session_state::connecting: return "connecting";
    case session_state::connected: return "connected";
    case session_state::suspended: return "suspended";
    case session_state::expired: return "expired";
    case session_state::auth_failed: return "auth_failed";
    case session_state::closed: return "closed";
  }
  return "unknown";
}

}  // namespace zkasio
