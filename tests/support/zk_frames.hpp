// ZooKeeper's framing as the test proxy reads it: I/O-free, so that the fuzz
// target (fuzz/fuzz_frames.cpp) drives it with any bytes.
//
// A frame is a 4-byte big-endian body length, then the body. After the
// handshake, a request's body starts with its xid and its type (both 32-bit
// big-endian); a reply's with its xid (-1 for a watch notification).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

namespace zkasio::test {

using frame = std::vector<unsigned char>;

// Larger than any frame ZooKeeper sends (jute.maxbuffer defaults to ~1 MiB);
// anything bigger (or negative) means the stream is not ZooKeeper's.
inline constexpr std::int64_t max_frame_body = 64 * 1024 * 1024;

struct split_result {
  std::vector<frame> frames;  // the whole frames at the front, in order
  std::size_t consumed = 0;   // their bytes; the rest waits for more
  bool not_zookeeper = false; // a length out of range: the stream is not ZooKeeper's
};

// Takes every whole frame off the front of `bytes` (stopping at a bad length).
split_result split_frames(const unsigned char* bytes, std::size_t size);

// A frame's xid (bytes 4-7), when it has one.
std::optional<std::int32_t> frame_xid(const frame& f);
// A request's type (bytes 8-11), when it has one.
std::optional<std::int32_t> request_type(const frame& f);
// The reply `reply` (after the handshake: xid, zxid, err, body) as the
// server would send it had the request failed with `err`: header only.
// Returned as is if it is too short to be a reply.
frame error_reply(const frame& reply, std::int32_t err);

}  // namespace zkasio::test
