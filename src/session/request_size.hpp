// The size of a request as jute encodes it: what the session checks against
// the server's jute.maxbuffer before sending (a larger request would make the
// server drop the connection).
#pragma once

#include <cstddef>
#include <string_view>
#include <zkasio/operations.hpp>

namespace zkasio::detail {

// Header (xid, type) of every request.
constexpr std::size_t header_bytes = 8;
// A multi's per-operation header (type, done, err) and its closing header.
constexpr std::size_t multi_header_bytes = 9;

// The bytes `op` takes on the wire (without the length prefix and header).
std::size_t request_size(const multi_op& op);
// The same for a create's and a set_data's parts (no op to build: no copies).
std::size_t create_request_size(std::string_view path, std::string_view data, const acl& access);
std::size_t set_data_request_size(std::string_view path, std::string_view data);

}  // namespace zkasio::detail
