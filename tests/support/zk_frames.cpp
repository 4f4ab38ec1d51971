#include "support/zk_frames.hpp"

namespace zkasio::test {
namespace {

std::int32_t read_be32(const unsigned char* p) {
  const std::uint32_t v = (std::uint32_t{p[0]} << 24) | (std::uint32_t{p[1]} << 16) |
                          (std::uint32_t{p[2]} << 8) | std::uint32_t{p[3]};
  return static_cast<std::int32_t>(v);
}

std::optional<std::int32_t> field(const frame& f, std::size_t offset) {
  if (f.size() < offset + 4) return std::nullopt;
  return read_be32(f.data() + offset);
}

}  // namespace

split_result split_frames(const unsigned char* bytes, std::size_t size) {
  split_result result;
  while (size - result.consumed >= 4) {
    const std::int64_t body = read_be32(bytes + result.consumed);
    if (body < 0 || body > max_frame_body) {
      result.not_zookeeper = true;
      break;
    }
    const auto total = static_cast<std::size_t>(body) + 4;
    if (size - result.consumed < total) break;
    result.frames.emplace_back(bytes + result.consumed, bytes + result.consumed + total);
    result.consumed += total;
  }
  return result;
}

std::optional<std::int32_t> frame_xid(const frame& f) { return field(f, 4); }

frame error_reply(const frame& reply, std::int32_t err) {
  // Length (16 now), xid and zxid as they were, then err; no body.
  if (reply.size() < 20) return reply;
  frame answer(reply.begin(), reply.begin() + 16);
  const std::uint32_t body = 16;
  const auto code = static_cast<std::uint32_t>(err);
  for (int i = 0; i < 4; ++i) {
    answer[static_cast<std::size_t>(i)] = static_cast<unsigned char>(body >> (24 - 8 * i));
    answer.push_back(static_cast<unsigned char>(code >> (24 - 8 * i)));
  }
  return answer;
}
std::optional<std::int32_t> request_type(const frame& f) { return field(f, 8); }

}  // namespace zkasio::test
