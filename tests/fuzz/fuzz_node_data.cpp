// The data a contender or revoker writes into a node, any bytes: the size
// the session checks against jute.maxbuffer before sending (request_size)
// is exactly the size of the request as jute encodes it, here encoded
// independently, so no request the server would drop for its size is sent
// and none it would take is refused.
#include <string>
#include <vector>
#include <zkasio/operations.hpp>

#include "fuzz/fuzz_check.hpp"
#include "session/request_size.hpp"

namespace {

// jute's encoding, written out: big-endian ints, length-prefixed strings.
struct jute {
  std::vector<std::uint8_t> bytes;
  void put_int(std::int32_t v) {
    for (int shift = 24; shift >= 0; shift -= 8) bytes.push_back(static_cast<std::uint8_t>(v >> shift));
  }
  void put_string(const std::string& s) {
    put_int(static_cast<std::int32_t>(s.size()));
    bytes.insert(bytes.end(), s.begin(), s.end());
  }
};

}  // namespace

void fuzz_node_data(const std::uint8_t* data, std::size_t size) {
  if (size < 2) return;
  bool create = data[0] & 1;
  bool creator_only = data[0] & 2;
  std::size_t path_length = data[1] % 64;
  if (size - 2 < path_length) return;
  std::string path(reinterpret_cast<const char*>(data + 2), path_length);
  std::string contents(reinterpret_cast<const char*>(data + 2 + path_length), size - 2 - path_length);
  jute request;
  request.put_string(path);
  request.put_string(contents);
  if (create) {
    zkasio::op::create op{path, contents,
                          zkasio::create_options(zkasio::create_mode::ephemeral_sequential,
                                                 creator_only ? zkasio::creator_all_acl() : zkasio::open_acl_unsafe())};
    request.put_int(static_cast<std::int32_t>(op.options.access.size()));
    for (auto& entry : op.options.access) {
      request.put_int(static_cast<std::int32_t>(entry.perms));
      request.put_string(entry.scheme);
      request.put_string(entry.id);
    }
    request.put_int(0);  // the flags
    FUZZ_CHECK(zkasio::detail::request_size(op) == request.bytes.size());
  } else {
    request.put_int(-1);  // the version
    FUZZ_CHECK(zkasio::detail::request_size(zkasio::op::set_data{path, contents}) == request.bytes.size());
  }
}

ZKASIO_FUZZ_TARGET(fuzz_node_data)
